"""After each test: Qt's event loops on this thread still run.

Once `QCoreApplication.exit` runs outside `app.exec()` (directly, or through a quit that lands while
`main()` is between starting and finishing its loop), Qt's thread data says "quit now" and every later
`QEventLoop.exec` returns at once; qtbot's waits then time out with an empty message in whichever tests
come next. This check names the test that left it so, and puts the loops back (`app.exec()` clears
the flag) so the tests after it are judged on their own.
"""

from __future__ import annotations

import sys


def event_loops_quit_at_once() -> bool:
    """Whether the thread's event loops return at once; if so, they run again after this call.

    Runs only when a test made the QApplication: it never imports Qt for tests that do not use it.
    """
    widgets = sys.modules.get("PySide6.QtWidgets")
    if widgets is None or widgets.QApplication.instance() is None:
        return False
    from PySide6.QtCore import QEventLoop, QTimer

    app = widgets.QApplication.instance()
    loop = QEventLoop()
    QTimer.singleShot(0, lambda: loop.exit(1))
    if loop.exec() == 1:
        return False
    QTimer.singleShot(0, app.quit)
    app.exec()  # starts by clearing the thread's quit flag; the zero timer ends it
    return True
