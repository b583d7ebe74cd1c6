"""Entry script of the bundle: the `tailor` executable (the window without arguments, the CLI with them).

`app.launcher.main` calls `multiprocessing.freeze_support()` first, so when the bundle is started again
as the engine child (spawn: `tailor --multiprocessing-fork ...`) it runs the engine, not a second app.
"""

import sys

from app.launcher import main

if __name__ == "__main__":
    sys.exit(main())
