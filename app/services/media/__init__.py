"""Images and audio a chat sends to a model that sees or hears (issue 33): taken in safely, kept
content-addressed.

No Qt: the CLI, the server and the window share it.

  limits.py    what is taken: formats, bytes, pixels, the longest side sent, images per message; a clip's
               bytes, length, channels and rate, clips per message
  sniff.py     the format by its magic bytes and an image's size from its header, before any decoding;
               audio told from images, compressed audio named
  files.py     a path's bytes, never blocking on a FIFO or a device, its size checked before it is read
  decode.py    the pixels a projector takes (RGB, first frame, orientation applied, alpha on white, capped)
  wav.py       a WAV header read by hand and checked; its samples as one float32 channel
  resample.py  one channel from the file's rate to the projector's (windowed sinc)
  intake.py    a path or bytes in, a PreparedImage or PreparedAudio out, or one line saying why not
  store.py     the originals kept by sha256 beside the chat history, written atomically, collected
"""
