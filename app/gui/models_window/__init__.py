"""The model manager window: search the hub, see what fits, download, manage the local library."""
