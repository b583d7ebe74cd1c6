"""Enter sends the attached images with the text, and the strip empties; while images are still being read,
or while a message is being edited, they stay."""

from __future__ import annotations

from pathlib import Path

from app.gui.composer.attachments import Attachments
from app.gui.composer.message_box import Composer
from app.gui.composer.sending import IMAGES_READING, Sending
from tests.app.chat.test_session_images import finish, picture, vision_chat

TIMEOUT_MS = 10_000


def test_enter_sends_the_images_and_empties_the_strip(qtbot, tmp_path: Path, starter_model: Path):
    chat = vision_chat(tmp_path, starter_model)
    try:
        composer, strip = Composer(), Attachments()
        qtbot.addWidget(composer)
        qtbot.addWidget(strip)
        sending = Sending(chat.session, composer, lambda: None, strip)
        notices: list[str] = []
        sending.notice.connect(notices.append)
        strip.add_files([picture(tmp_path / "a.png", "red"), picture(tmp_path / "b.png", "blue")])
        # Read on a pool thread, delivered on this one's event loop (not run yet): a send now would go without
        # them, and is refused.
        assert strip.busy
        sending.submit("Too soon?")
        assert notices == [IMAGES_READING] and chat.engine.prompts == {}
        qtbot.waitUntil(lambda: len(strip.images) == 2 and not strip.busy, timeout=TIMEOUT_MS)
        composer.setPlainText("Compare them.")
        sending.submit(composer.toPlainText())
        request_id = finish(chat, "Red and blue.")
        (sent,) = [m for m in chat.engine.prompts[request_id] if m.role == "user"]
        assert sent.content == "Compare them." and len(sent.media) == 2
        assert strip.images == () and composer.toPlainText() == ""
    finally:
        chat.store.close()


def test_an_edit_leaves_the_attached_images_for_the_next_message(qtbot, tmp_path: Path, starter_model: Path):
    chat = vision_chat(tmp_path, starter_model)
    try:
        composer, strip = Composer(), Attachments()
        qtbot.addWidget(composer)
        qtbot.addWidget(strip)
        sending = Sending(chat.session, composer, lambda: None, strip)
        sending.submit("First.")
        finish(chat, "Yes.")
        strip.add_files([picture(tmp_path / "c.png", "green")])
        qtbot.waitUntil(lambda: len(strip.images) == 1, timeout=TIMEOUT_MS)
        sending.edit_last_message()
        sending.submit("First, edited.")
        finish(chat, "Yes again.")
        assert [i.name for i in strip.images] == ["c.png"]
    finally:
        chat.store.close()
