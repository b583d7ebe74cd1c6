"""The window's path: a chat whose context the plan says does not fit is never sent to the engine. The
message is kept, the banner says why, the model loaded before stays loaded and answers once the context
is one that fits. Against a scripted engine and the real planner (16 GiB of RAM, no GPU): the window offers
contexts up to 1,048,576 tokens, about 24 GiB of KV cache for the starter model."""

from __future__ import annotations

from app.services.history.store import ChatSettings
from app.services.load_settings import LoadSettings

HUGE = 1 << 20  # the most the settings panel offers (app/services/history/settings_fields.py)


def test_a_context_that_does_not_fit_is_refused_and_the_loaded_model_stays(chat):
    chat.started()
    chat.reply("Hi", "Hello")
    assert len(chat.engine.loads) == 1 and chat.heard.last("model_changed") == ("Scripted · context 2048",)
    chat.session.update_settings(ChatSettings(load=LoadSettings(n_ctx=HUGE)))
    chat.heard.clear()

    assert chat.session.send("Tell me more")  # the message is stored; the reply cannot start
    chat.engine.pump()
    assert len(chat.engine.loads) == 1 and len(chat.engine.prompts) == 1  # nothing asked of the engine
    text, can_reload = chat.heard.last("problem")
    assert text.startswith("Could not load the model SmolLM2-135M-Instruct.Q4_1.gguf: A context of 1,048,576 "
                           "tokens does not fit here: it needs ") and not can_reload
    assert text.endswith("; the most that fits is 8,192 tokens, the model's trained length.")
    assert chat.heard.last("model_changed") == ("Scripted · context 2048",)  # still loaded
    assert chat.heard.last("busy_changed") == (False,) and not chat.session.busy
    messages = chat.store.list_messages(chat.session.current.id)
    assert [(m.role, m.content) for m in messages][-1] == ("user", "Tell me more")

    chat.session.update_settings(ChatSettings(load=LoadSettings(n_ctx=2048)))
    request_id = chat.reply("Again, please", "Sure")  # the model loaded before answers: no reload
    assert len(chat.engine.loads) == 1 and chat.engine.prompts[request_id][-1].content == "Again, please"


def test_a_first_load_that_does_not_fit_leaves_no_model_and_says_why(chat):
    chat.session.update_settings(ChatSettings(load=LoadSettings(n_ctx=HUGE)))
    chat.started()
    assert chat.engine.starts == 1 and chat.engine.loads == []
    assert chat.heard.last("model_changed") == ("No model loaded",)
    assert "A context of 1,048,576 tokens does not fit here" in chat.heard.last("problem")[0]
