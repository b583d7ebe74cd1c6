"""Images a chat sends to a model that sees (issue 33): taken in safely, kept content-addressed.

No Qt: the CLI, the server and the window share it.

  limits.py  what is taken: formats, bytes, pixels, the longest side sent, images per message
  sniff.py   the format by its magic bytes and the size from its header, before any decoding
  decode.py  the pixels a projector takes (RGB, first frame, orientation applied, alpha on white, capped)
  intake.py  a path or bytes in, a PreparedImage out, or one line saying why not
  store.py   the originals kept by sha256 beside the chat history, written atomically, collected
"""
