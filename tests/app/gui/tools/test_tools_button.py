"""The Tools button beside the message box: the servers whose tools the chat may call, and whether each reply
must call one ("Require a tool call")."""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QStyle

from app.gui.tools.tools_button import ToolsButton
from app.mcp.types import ServerStatus
from tests.app.gui.tools.test_servers_dialog import FAILED, READY

WAIT_MS = 3000


def _servers(button: ToolsButton) -> list[QAction]:
    """The menu's server entries (checkable, above the separator)."""
    return [a for a in button.menu().actions() if a.isCheckable() and a is not button.require_action]


def test_the_tools_button_lists_the_servers_and_says_what_was_chosen(qtbot):
    button = ToolsButton()
    qtbot.addWidget(button)
    button.set_statuses([READY, FAILED, ServerStatus("git", "stopped")])
    assert button.text() == "Tools"
    actions = _servers(button)
    assert [a.text() for a in actions] == ["files (ready · 2 tools)", "web (failed: HTTP 401 from https://example.com/mcp)",
                                           "git (stopped)"]
    with qtbot.waitSignal(button.servers_chosen, timeout=WAIT_MS) as chosen:
        actions[2].trigger()
    assert chosen.args == [("git",)] and button.text() == "Tools · 1"
    # The text and the menu's arrow both fit: the arrow is drawn over the text's end otherwise.
    arrow = button.style().pixelMetric(QStyle.PixelMetric.PM_MenuButtonIndicator, None, button)
    assert button.sizeHint().width() >= button.fontMetrics().horizontalAdvance("Tools · 1") + arrow + 8
    with qtbot.waitSignal(button.servers_chosen, timeout=WAIT_MS) as chosen:
        actions[0].trigger()
    assert chosen.args == [("files", "git")] and button.text() == "Tools · 2"


def test_the_tools_button_shows_a_chats_choice_without_emitting(qtbot):
    button = ToolsButton()
    qtbot.addWidget(button)
    button.set_statuses([READY, FAILED])
    with qtbot.assertNotEmitted(button.servers_chosen), qtbot.assertNotEmitted(button.tool_choice_chosen):
        button.show_choice(("web",), "required")
    assert button.text() == "Tools · 1"
    assert [a.isChecked() for a in _servers(button)] == [False, True]
    assert button.require_action.isChecked() and button.tool_choice() == "required"
    button.update_status(ServerStatus("web", "ready"))
    assert [a.text() for a in _servers(button)][1] == "web (ready · 0 tools)"
    assert button.require_action.isChecked()  # the menu made again keeps it
    button.set_statuses([])
    assert button.text() == "Tools" and "No MCP servers yet" in [a.text() for a in button.menu().actions()]


def test_require_a_tool_call_is_a_check_of_its_own_and_off_while_no_server_is_on(qtbot):
    button = ToolsButton()
    qtbot.addWidget(button)
    button.set_statuses([READY])
    texts = [a.text() for a in button.menu().actions() if not a.isSeparator()]
    assert texts == ["files (ready · 2 tools)", "Require a tool call", "Manage servers…"]
    require = button.require_action
    assert require.isCheckable() and not require.isChecked() and not require.isEnabled()  # no server on
    with qtbot.waitSignal(button.servers_chosen, timeout=WAIT_MS):
        _servers(button)[0].trigger()
    assert require.isEnabled()
    with qtbot.waitSignal(button.tool_choice_chosen, timeout=WAIT_MS) as chosen, \
            qtbot.assertNotEmitted(button.servers_chosen):
        require.trigger()
    assert chosen.args == ["required"] and button.tool_choice() == "required"
    with qtbot.waitSignal(button.tool_choice_chosen, timeout=WAIT_MS) as chosen:
        require.trigger()
    assert chosen.args == ["auto"]
    with qtbot.waitSignal(button.servers_chosen, timeout=WAIT_MS):
        _servers(button)[0].trigger()
    assert not require.isEnabled()
