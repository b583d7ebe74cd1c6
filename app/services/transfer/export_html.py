"""Chats as one self-contained HTML page: inline CSS, no script, no external resource.

Each chat shows the branch it shows in the window; a message of it that has other versions says so
("version 2 of 3"), so nothing looks hidden (the JSON export holds every branch). Messages are rendered from Markdown by app/services/markdown_render.py, which escapes raw HTML in
them (a message with `<script>` shows as text), drops unsafe link schemes and turns images into
plain links, so the page loads nothing; code blocks keep pygments' inline colours. A reply's tool steps
come before its answer (export_steps.py), a tool's arguments and results as escaped code. A message's
images are inline `data:` URIs (the page stays one file that fetches nothing: its policy allows images
from `data:` only), shown as thumbnails; a click (focus) shows one at full width, without script. Its audio
clips are `<audio controls>` players whose source is an inline `data:` URI too (the policy allows media from
`data:` only): the browser's own player, no script, nothing fetched. A link to a `data:` URI would not do:
browsers refuse to open one at the top level. No Qt here.
"""

from __future__ import annotations

from html import escape

from app.services.history.sent_documents import SentDocuments
from app.services.history.store import AudioRef, FileRef, ImageRef, Message
from app.services.markdown_render import highlight_code, render_markdown
from app.services.media.wav import clock
from app.services.transfer.export import ROLE_NAMES, ChatRecord, display_title, message_notes, meta_line
from app.services.transfer.export_media import ExportMedia
from app.services.transfer.export_steps import STEPS_CSS, steps_html

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 52rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.5; color: #1d1f23; background: #fff; }
h1 { font-size: 1.6rem; margin: 2.5rem 0 0.2rem; }
.meta { color: #667; font-size: 0.85rem; margin-bottom: 1rem; }
.message { border-radius: 8px; padding: 0.4rem 1rem; margin: 0.8rem 0; }
.user { background: #eef3ff; }
.assistant { background: #f7f7f8; }
.system { background: #fff8e6; }
.role { font-weight: 600; font-size: 0.85rem; margin-top: 0.4rem; }
.state { color: #a33; font-weight: normal; }
.version { color: #667; font-weight: normal; }
details { margin: 0.4rem 0; color: #556; }
summary { cursor: pointer; font-size: 0.85rem; }
pre { overflow-x: auto; border-radius: 6px; white-space: pre-wrap; }
code { font-family: ui-monospace, "SF Mono", Consolas, monospace; }
table { border-collapse: collapse; }
hr { border: none; border-top: 1px solid #ddd; margin: 2rem 0; }
.images { margin: 0.5rem 0; }
.images img { max-width: 16rem; max-height: 12rem; margin: 0 0.4rem 0.4rem 0; border-radius: 6px;
              vertical-align: top; cursor: zoom-in; }
.images img:focus { max-width: 100%; max-height: none; cursor: zoom-out; outline: none; }
.missing { color: #667; font-style: italic; }
.clips { margin: 0.5rem 0; }
.clip { display: inline-block; margin: 0 0.6rem 0.4rem 0; font-size: 0.85rem; color: #445; }
.clip audio { display: block; margin-top: 0.2rem; }
""" + STEPS_CSS


def images_html(images: tuple[ImageRef, ...], media: ExportMedia | None) -> str:
    """A message's images as thumbnails (focusable: a click shows one whole), each an <img> with its data
    inline; one whose bytes cannot be read (or with no `media`) is named in words instead."""
    parts = ['<div class="images">']
    for ref in images:
        name = escape(display_title(ref.name))
        uri = media.data_uri(ref) if media is not None else None
        if uri is None:
            parts.append(f'<span class="missing">[image: {name}]</span>')
        else:
            parts.append(f'<img src="{uri}" alt="{name}" title="{name} ({ref.width} × {ref.height})"'
                         f' width="{ref.width}" height="{ref.height}" tabindex="0">')
    parts.append("</div>")
    return "\n".join(parts)


def clips_html(clips: tuple[AudioRef, ...], media: ExportMedia | None) -> str:
    """A message's clips, each its name and length over the browser's player with its data inline; one whose
    bytes cannot be read (or with no `media`) is named in words instead."""
    parts = ['<div class="clips">']
    for ref in clips:
        label = escape(f"{display_title(ref.name)} · {clock(ref.seconds)}")
        uri = media.data_uri(ref) if media is not None else None
        if uri is None:
            parts.append(f'<span class="missing">[audio: {label}]</span>')
        else:
            parts.append(f'<div class="clip">{label}<audio controls preload="metadata" src="{uri}"'
                         f' title="{label}"></audio></div>')
    parts.append("</div>")
    return "\n".join(parts)


def _message_html(message: Message, notes: list[str], media: ExportMedia | None) -> str:
    state = message.state
    note = "" if state == "complete" else f' <span class="state">({escape(state)})</span>'
    note += "".join(f' <span class="version">· {escape(n)}</span>' for n in notes if n != state)
    parts = [f'<div class="message {escape(message.role)}">',
             f'<div class="role">{escape(ROLE_NAMES.get(message.role, message.role))}{note}</div>']
    if message.images:
        parts.append(images_html(message.images, media))
    if message.clips:
        parts.append(clips_html(message.clips, media))
    if message.tool_steps:
        parts.append(steps_html(message.tool_steps))
    if message.reasoning:
        summary = "Thought" + ("" if message.reasoning_closed else " (cut off)")
        parts.append(f"<details><summary>{summary}</summary>\n{render_markdown(message.reasoning)}</details>")
    if message.content or not (message.tool_steps or message.images or message.clips or message.documents):
        parts.append(render_markdown(message.content) if message.content else "<p><em>(empty)</em></p>")
    if message.documents is not None or message.files:
        parts.append(documents_html(message.documents, message.files))
    parts.append("</div>")
    return "\n".join(parts)


def documents_html(documents: SentDocuments | None, files: tuple[FileRef, ...] = ()) -> str:
    """A message's documents: its attached files by name, a line per document and per source, then the block as
    the model read it, folded (the page is one file: the originals travel in JSON exports, `--with-files`)."""
    lines = "".join(f"<li>Attached: {escape(ref.name)}</li>" for ref in files)
    if documents is None:
        return f'<ul class="documents">{lines}</ul>'
    lines += "".join(f"<li>{escape(line)}</li>" for line in (*documents.notes, *(s.label for s in documents.sources)))
    return (f'<ul class="documents">{lines}</ul>\n<details><summary>Documents as sent</summary>\n'
            f"<pre>{escape(documents.block)}</pre></details>")


def chat_html(record: ChatRecord, media: ExportMedia | None = None) -> str:
    """One chat as an HTML <section>: the branch it shows, its images and clips inline as `media` reads them."""
    c = record.conversation
    shown, versions = record.branch(), record.versions()
    head = [
        "<section>",
        f"<h1>{escape(display_title(c.title))}</h1>",
        f'<div class="meta">{escape(meta_line(record, shown))}</div>',
    ]
    if c.settings.system_prompt:
        head.append(f"<details><summary>System prompt</summary>\n{highlight_code(c.settings.system_prompt, '')}"
                    "</details>")
    body = [_message_html(m, message_notes(m, versions), media) for m in shown]
    return "\n".join([*head, *body, "</section>"])


def to_html(records: list[ChatRecord], media: ExportMedia | None = None) -> str:
    """The chats as one HTML document (the first chat's title as its title), images and clips inline (None:
    named)."""
    title = display_title(records[0].conversation.title) if len(records) == 1 else "Tailor chats"
    sections = "\n<hr>\n".join(chat_html(r, media) for r in records)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        # No script and nothing fetched, even if a message's link slipped through: the page says so itself
        # (its images and clips are `data:` URIs, the only source it allows them).
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline';"
        " img-src data:; media-src data:\">\n"
        f"<title>{escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"{sections}\n</body>\n</html>\n"
    )
