"""What the window, the CLI and the server share, without Qt: the chat store, load planning,
the pull plan, paths, Markdown rendering, logging."""
