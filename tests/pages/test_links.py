"""Signed page links and session cookies: what signs someone in, for how long, and to where."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.pages.links import LinkRefused, PageKeys, page_secret

KEYS = PageKeys(page_secret("service-token"), link_s=600, session_s=3600)


def test_a_link_signs_its_user_in_to_the_page_it_names() -> None:
    token = KEYS.link_token("U0OWNER1", "/runs/r-0123456789ab")

    opened = KEYS.open_link(token)

    assert (opened.user, opened.path) == ("U0OWNER1", "/runs/r-0123456789ab")
    assert KEYS.session_user(KEYS.session("U0OWNER1")) == "U0OWNER1"


def test_a_link_from_another_key_or_cut_short_is_refused() -> None:
    token = KEYS.link_token("U0OWNER1")
    other = PageKeys(page_secret("another-token"), link_s=600, session_s=3600)

    for bad in (other.link_token("U0OWNER1"), token[:-3], "", "not-a-token"):
        with pytest.raises(LinkRefused, match="not a link this service made"):
            KEYS.open_link(bad)


def test_an_old_link_is_refused_saying_how_to_get_a_new_one() -> None:
    short = PageKeys(page_secret("service-token"), link_s=0, session_s=3600)
    token = short.link_token("U0OWNER1")
    time.sleep(1.1)  # signatures count whole seconds

    with pytest.raises(LinkRefused, match=r"this link has expired .*/replay open"):
        short.open_link(token)


def test_an_ended_forged_or_absent_session_is_nobody() -> None:
    ended = PageKeys(page_secret("service-token"), link_s=600, session_s=0)
    cookie = ended.session("U0OWNER1")
    time.sleep(1.1)

    assert ended.session_user(cookie) is None
    assert KEYS.session_user(cookie[:-2] + "xx") is None
    assert KEYS.session_user(None) is None and KEYS.session_user("") is None


@given(st.text(max_size=40))
def test_a_link_leads_only_to_a_page_of_this_service(path: str) -> None:
    """No open redirect: anything but `/` and a run's page is refused when the link is made."""
    try:
        KEYS.link_token("U0OWNER1", path)
    except ValueError:
        return
    assert path == "/" or (path.startswith("/runs/r-") and "/" not in path[len("/runs/") :])


@pytest.mark.parametrize("path", ["//evil.example", "https://evil.example/", "/runs/../admin", "/runs/r-1"])
def test_a_path_elsewhere_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="not a page of this service"):
        KEYS.link_token("U0OWNER1", path)
