"""The failure every `tailor` command reports as one line on stderr with exit status 1 (each command's own
errors derive from it), in a module of its own so that the command line imports only the command it runs."""


class CliError(Exception):
    """A failure reported as one line on stderr with a non-zero exit."""
