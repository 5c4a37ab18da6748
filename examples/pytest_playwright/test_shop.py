"""
Two tests of the shop, each through its own netlog session: the first
passes; the second fails on purpose (there are no teapots), and its HAR is
kept in test-results/.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect


def test_mugs(page: Page, shop: str) -> None:
    page.goto(f"{shop}/search?q=mug")
    expect(page.locator("#results li")).to_have_text(["mug", "travel mug"])


def test_teapots(page: Page, shop: str) -> None:
    page.goto(f"{shop}/search?q=teapot")
    expect(page.locator("#results li")).to_have_text(["teapot"], timeout=2000)
