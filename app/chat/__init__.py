"""The conversation without Qt: sending, replies streaming into the store, the model's load state."""
