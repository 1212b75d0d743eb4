"""Check an HTML report the way a browser would load it: what it fetches, what it shows."""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Attributes through which a page makes the browser fetch something.
_FETCHING = {"src", "href", "srcset", "poster", "data", "action", "formaction", "background"}
_NAMESPACE_ATTRIBUTES = {"xmlns", "xmlns:xlink"}  # identifiers, never fetched


class Page(HTMLParser):
    """Parse a page; keep the tags, the fetching attributes and the visible text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.references: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.ids: list[str] = []
        self.texts: list[str] = []
        self._in: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if value is None or name in _NAMESPACE_ATTRIBUTES:
                continue
            if name in _FETCHING or name.endswith(":href"):
                self.references.append((tag, name, value))
            if name == "id":
                self.ids.append(value)

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    @property
    def text(self) -> str:
        return " ".join(t.strip() for t in self.texts if t.strip())


def assert_self_contained(text: str) -> Page:
    """Fail unless the page loads nothing from anywhere: no script, no link, no URL in CSS."""
    page = Page(text)
    assert text.lstrip().lower().startswith("<!doctype html>")
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    for tag, attribute, value in page.references:
        # In-page anchors and inline data only.
        assert value.startswith(("#", "data:")), (tag, attribute, value)
    styles = re.findall(r"<style[^>]*>(.*?)</style>", text, flags=re.DOTALL | re.IGNORECASE)
    for css in styles:
        assert "@import" not in css and not re.search(r"url\(\s*['\"]?(?!#|data:)", css), css[:200]
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, flags=re.IGNORECASE)
    return page
