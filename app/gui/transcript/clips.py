"""A message's audio clips in the transcript: a chip each, the style's sound icon, its name and length
("question.wav · 0:12"), on the theme's code background. No playback (the window has no multimedia module): a
clip is what the model heard, named.

The icon is an `<img src="tailor-sound:icon">` whose pixels the document asks its browser for
(ChatView.loadResource: `sound_icon`).
"""

from __future__ import annotations

from html import escape

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QStyle, QWidget

from app.services.history.records import AudioRef
from app.services.media.wav import clock

SOUND_SCHEME = "tailor-sound"  # <img src>: the sound icon
ICON_SIDE = 16  # pixels


def clip_text(ref: AudioRef) -> str:
    """A clip as its chip names it: "question.wav · 0:12"."""
    return f"{ref.name} · {clock(ref.seconds)}"


def clips_html(clips: tuple[AudioRef, ...], background: str) -> str:
    """The chips of a message's clips, in order, on `background` (a colour name from the palette)."""
    if not clips:
        return ""
    chips = [f'<span style="background-color:{background};">&nbsp;<img src="{SOUND_SCHEME}:icon" width="{ICON_SIDE}"'
             f' height="{ICON_SIDE}" alt="audio">&nbsp;{escape(clip_text(ref))}&nbsp;</span>' for ref in clips]
    return "<p>" + "&nbsp;&nbsp;".join(chips) + "</p>"


def sound_icon(widget: QWidget) -> QImage:
    """The style's sound icon at the chip's size (the document's resource for SOUND_SCHEME)."""
    icon = widget.style().standardIcon(QStyle.StandardPixmap.SP_MediaVolume)
    return icon.pixmap(ICON_SIDE, ICON_SIDE).toImage()
