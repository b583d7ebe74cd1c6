"""Where the tests find the repository and their fixtures, wherever in tests/ a test file sits."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
CHAT_TEMPLATES = FIXTURES / "chat_templates"
