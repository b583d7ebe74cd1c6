"""An edit in the settings panel changes what the panel shows, and nothing else of the chat's settings: its MCP
servers, tool choice and "Always in this chat" tools are chosen elsewhere and stay (they were lost with any
edit of the temperature before)."""

from __future__ import annotations

from dataclasses import replace


def test_a_panel_edit_keeps_the_chats_tool_settings(qtbot, make_window):
    window = make_window(start=False)
    session = window.session
    session.new_conversation()
    session.set_tool_servers(("files",))
    session.set_tool_choice("required")
    session.update_settings(replace(session.current.settings, allowed_tools=("files__read",), tool_step_cap=3))
    window.settings_panel.temperature.setValue(0.5)
    window.settings_panel.commit()
    stored = session.store.get_conversation(session.current.id).settings
    for settings in (session.current.settings, stored):
        assert settings.temperature == 0.5
        assert (settings.tool_servers, settings.tool_choice, settings.allowed_tools, settings.tool_step_cap) == (
            ("files",), "required", ("files__read",), 3)
