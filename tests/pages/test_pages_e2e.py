"""The run page and the console, served by a real `replayd`: nothing shows without a session, a signed
link sets a private cookie and an old one is refused; and in Debian's chromium, the console lists a
queued and a running run, a run's page draws its rate and its partitions while it publishes and its
verdict once it has ended, and a verdict's missing ids (the topic lost them) are listed in full, a
page at a time and as CSV. Screenshots go to `REPLAY_TEST_SCREENSHOTS` when it is set (docs/images)."""

from __future__ import annotations

import csv
import io
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from itsdangerous import URLSafeTimedSerializer
from playwright.sync_api import Browser, Page, Response

from daemon.cli.main import EXIT_OK, main
from daemon.contract.models import ReplayBody
from daemon.core.errors import NotFound
from daemon.pages.links import SESSION_COOKIE, page_secret
from daemon.slack.page_messages import PAGE_LINK_ACTION
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.daemon import API_TOKEN, OWNER, STRANGER, DaemonProcess, running_daemon
from tests.fixtures.kafka import lose_head
from tests.fixtures.runs import TERMINAL, wait_for
from tests.fixtures.slack import BotUnderTest, serve_bot

pytestmark = [pytest.mark.kafka]

PAGE_BUDGET_BYTES = 300_000  # the first load of a page, everything it fetches
LOST = 30  # records the topic loses from the head of partition 0 after a run


@pytest.fixture(scope="module")
def pages_daemon(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str
) -> Iterator[DaemonProcess]:
    """One job at a time, so a second replay waits in line."""
    daemon = running_daemon(
        tmp_path_factory.mktemp("pages"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={"REPLAY_LOCAL_MAX_CONCURRENT_RUNS": "1"},
    )
    yield daemon
    daemon.stop()


def test_without_a_session_a_page_says_how_to_open_it_and_shows_no_data(pages_daemon: DaemonProcess) -> None:
    with httpx.Client(base_url=pages_daemon.url) as http:
        console = http.get("/")
        run = http.get("/runs/r-0123456789ab")
        data = http.get("/runs/r-0123456789ab/chart.json")
    with httpx.Client(base_url=pages_daemon.url, cookies={SESSION_COOKIE: OWNER}) as http:
        forged = http.get("/")  # a cookie naming a user, not signed by the daemon

    assert console.status_code == run.status_code == forged.status_code == 401
    assert "Open this page from Slack or the CLI" in console.text and "/replay open" in console.text
    assert "orders" not in console.text  # not even the catalog
    assert data.status_code == 401 and "not signed in" in data.json()["error"]


def test_an_address_a_browser_cannot_be_shown_answers_a_page_that_says_why(
    pages_daemon: DaemonProcess,
) -> None:
    """A bad parameter or no such page: a browser (it asks for HTML) gets a page with the reason and
    a way back; an API client asking the same gets the JSON error, as before."""
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    with httpx.Client(base_url=pages_daemon.url, cookies={SESSION_COOKIE: OWNER}) as http:
        bad = http.get("/", params={"state": "x" * 40}, headers=browser)
        nowhere = http.get("/no/such/page", headers=browser)
        api = http.get("/", params={"state": "x" * 40})

    assert bad.status_code == 422 and bad.headers["content-type"].startswith("text/html")
    assert "This page cannot be shown" in bad.text and "state: String should have at most 16" in bad.text
    assert 'href="/"' in bad.text and bad.headers["cache-control"] == "no-store"
    assert nowhere.status_code == 404 and "no such route" in nowhere.text and "<h1>" in nowhere.text
    assert api.status_code == 422 and api.json()["error"].startswith("state: String should have at most 16")


def test_a_link_sets_a_private_cookie_and_leads_to_its_page(pages_daemon: DaemonProcess) -> None:
    with pages_daemon.client() as client:
        link = client.page_link(OWNER)
        with pytest.raises(NotFound):
            client.page_link(OWNER, "r-0123456789ab")  # no link to a page that does not exist

    assert link.url.startswith(f"{pages_daemon.url}/login?token=")
    with httpx.Client() as http:
        opened = http.get(link.url)
        assert opened.status_code == 303 and opened.headers["location"] == "/"
        cookie = opened.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie  # plain http
        console = http.get(f"{pages_daemon.url}/")

    assert console.status_code == 200
    assert "The estate" in console.text and ">orders</a></td>" in console.text
    assert f"signed in as <code>{OWNER}</code>" in console.text


def test_a_link_older_than_its_minutes_is_refused(
    pages_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signed with the daemon's key an hour ago (the default link opens within 10 minutes)."""
    signer = URLSafeTimedSerializer(page_secret(API_TOKEN), salt="replay-page-link")
    an_hour_ago = time.time() - 3600
    with monkeypatch.context() as patched:
        patched.setattr(time, "time", lambda: an_hour_ago)  # the signature's clock only
        token = signer.dumps({"u": OWNER, "p": "/"})

    with httpx.Client(base_url=pages_daemon.url) as http:
        refused = http.get("/login", params={"token": token})

    assert refused.status_code == 403
    assert "this link has expired" in refused.text and "set-cookie" not in refused.headers


def _open(page: Page, url: str) -> int:
    """Open `url` in a fresh load and return the bytes it fetched (its page weight)."""
    fetched: list[int] = []

    def count(answer: Response) -> None:
        if answer.status < 300:  # the login redirect has no body
            fetched.append(len(answer.body()))

    page.on("response", count)
    try:
        page.goto(url, wait_until="networkidle")
    finally:
        page.remove_listener("response", count)
    return sum(fetched)


def _shoot(page: Page, name: str, tmp_path: Path) -> None:
    directory = Path(os.environ.get("REPLAY_TEST_SCREENSHOTS") or tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(directory / name), full_page=True)


@pytest.mark.spark
def test_the_console_lists_the_queue_and_a_runs_page_draws_it_live_then_its_verdict(
    pages_daemon: DaemonProcess, browser: Browser, tmp_path: Path
) -> None:
    with pages_daemon.client() as client:
        # two days at 60 events a second: about ten seconds of publishing to watch
        going = client.create_replay(
            OWNER, ReplayBody(source="orders", window="2024-01-05..2024-01-06", tps=60)
        )
        waiting = client.create_replay(OWNER, ReplayBody(source="orders", window="2024-01-07", tps=60))
        wait_for(client, going.id, {"running"}, timeout_s=120)
        console_link, run_link = client.page_link(OWNER), client.page_link(OWNER, going.id)

        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        console_weight = _open(page, console_link.url)
        rows = page.locator("#runs tbody tr")
        listed = {
            row.locator("td").nth(0).inner_text(): row.locator("td").nth(1).inner_text() for row in rows.all()
        }
        assert listed[going.id] == "running", listed
        assert listed[waiting.id].startswith("queued (1 in line)"), listed
        _shoot(page, "console.png", tmp_path)
        page.select_option("select[name=state]", "queued")
        page.click("form.filters button")
        page.wait_for_url("**/?state=queued**")
        assert [row.locator("td").nth(0).inner_text() for row in rows.all()] == [waiting.id]
        page.goto(f"{pages_daemon.url}/?source=payments")
        assert "No runs like that." in page.locator("#runs-h + form + p").inner_text()

        run_weight = _open(page, run_link.url)
        paint_ms = page.evaluate(
            "() => (performance.getEntriesByName('first-contentful-paint')[0] || {startTime: null}).startTime"
        )
        chart = page.locator("#chart")
        page.wait_for_function("() => Number(document.getElementById('chart').dataset.points || 0) >= 2")
        early = int(chart.get_attribute("data-points") or 0)
        assert chart.get_attribute("data-state") == "running"
        page.wait_for_function(
            f"() => Number(document.getElementById('chart').dataset.points || 0) > {early}", timeout=60_000
        )  # it moved while the run published, without a reload
        live = _partition_lines(page)
        assert live and sum(line[1] for line in live) > 0, live  # each partition's beacons, live
        page.wait_for_function(
            "() => document.getElementById('state').textContent === 'succeeded'", timeout=120_000
        )
        page.reload(wait_until="networkidle")
        ended = wait_for(client, going.id, TERMINAL)
        assert "Clean" in page.locator("#verdict").inner_text(), ended.reconcile
        assert page.locator("#confirmed").inner_text() == f"{ended.confirmed:,}"
        final = _partition_lines(page)  # the job's own report: every partition whole
        assert {line[4] for line in final} == {"done"} and all(line[1] == line[2] for line in final), final
        assert sum(line[1] for line in final) == ended.confirmed == ended.rows_selected
        assert "reported them at its end" in page.locator("#partitions-note").inner_text()
        _shoot(page, "run-page.png", tmp_path)
        context.close()
        client.cancel_replay(OWNER, waiting.id)

    print(f"page weight: console {console_weight:,} B, run page {run_weight:,} B; first paint {paint_ms} ms")
    assert console_weight < PAGE_BUDGET_BYTES and run_weight < PAGE_BUDGET_BYTES
    assert paint_ms is not None


def _partition_lines(page: Page) -> list[tuple[int, int, int, int, str]]:
    """The partitions table as the browser shows it: (partition, confirmed, rows, tries, state)."""
    lines = []
    for row in page.locator("#partitions tbody tr").all():
        cells = [cell.inner_text() for cell in row.locator("td").all()]
        lines.append((int(cells[0]), _number(cells[1]), _number(cells[2]), int(cells[4]), cells[5]))
    return lines


def _number(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.mark.spark
def test_a_verdicts_missing_ids_are_listed_in_pages_and_as_csv_exactly_as_the_topic_lost_them(
    pages_daemon: DaemonProcess, browser: Browser, kafka_bootstrap: str, tmp_path: Path
) -> None:
    with pages_daemon.client() as client:
        created = client.create_replay(OWNER, ReplayBody(source="orders", window="2024-01-06", tps=5000))
        run = wait_for(client, created.id, TERMINAL)
        assert run.state == "succeeded" and run.reconcile is not None and run.reconcile.missing == 0
        lost = lose_head(kafka_bootstrap, run.topic, LOST)
        checking = client.reconcile(OWNER, run.id)
        wait_for(client, checking.id, TERMINAL)
        link = client.page_link(OWNER, run.id)

    context = browser.new_context()
    page = context.new_page()
    page.goto(link.url, wait_until="networkidle")
    assert f"{LOST} listed" in page.locator("#ids-missing + p").inner_text()
    page.locator("#verdict-h").scroll_into_view_if_needed()
    _shoot(page, "verdict-lists.png", tmp_path)
    shown = page.locator("#ids-missing ~ table.ids").first.locator("tbody tr td code").all_inner_texts()
    assert shown == sorted(lost)[:20]  # the page opens with the first twenty
    page.click("#ids-missing + p a >> text=Every one")
    page.wait_for_url(f"**/runs/{run.id}/ids/missing")
    assert page.locator("#ids tbody tr td code").all_inner_texts() == sorted(lost)
    download = page.request.get(f"{pages_daemon.url}/runs/{run.id}/ids/missing.csv")
    assert download.ok and download.headers["content-type"].startswith("text/csv")
    assert f'filename="{run.id}-missing.csv"' in download.headers["content-disposition"]
    rows = list(csv.reader(io.StringIO(download.text())))
    assert rows[0] == ["event_id", "records"] and rows[1:] == [[event_id, "0"] for event_id in sorted(lost)]
    unknown = page.request.get(f"{pages_daemon.url}/runs/{run.id}/ids/lost")
    assert unknown.status == 404 and "missing, unexpected and duplicated" in unknown.text()
    context.close()


@pytest.fixture(scope="module")
def bot(slack: SlackStandin, pages_daemon: DaemonProcess) -> Iterator[BotUnderTest]:
    served = serve_bot(slack, pages_daemon.url, pages_daemon.token, daemon_timeout_s=30.0)
    try:
        yield served
    finally:
        served.server.stop()


def _signs_in(url: str, daemon: DaemonProcess) -> str:
    """The page a link leads to, opened with the cookie it set."""
    with httpx.Client(follow_redirects=True) as http:
        page = http.get(url)
    assert page.status_code == 200 and str(page.url).startswith(daemon.url)
    return page.text


def test_slack_and_the_cli_hand_out_links_that_sign_their_asker_in(
    bot: BotUnderTest, pages_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    slashed = bot.slash("open", user=OWNER)
    [reply] = bot.replies(slashed.key, timeout_s=30)
    [button] = [e for b in reply["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert reply.get("response_type", "ephemeral") == "ephemeral"  # a link signs in whoever opens it
    assert f"signed in as <code>{OWNER}</code>" in _signs_in(button["url"], pages_daemon)
    refused = bot.slash("open r-1")
    assert "/replay open [run-id]" in refused.ack["text"]

    # a run card's button: whoever clicks gets a link of their own, shown to them alone
    with pages_daemon.client() as client:
        run = client.create_replay(OWNER, ReplayBody(source="orders", window="2024-01-07", tps=60))
        client.cancel_replay(OWNER, run.id)  # the page is the run's whatever its state
    clicked, key = bot.click(PAGE_LINK_ACTION, run.id, user=STRANGER)
    assert clicked.status_code == 200
    [sent] = bot.replies(key, timeout_s=30)
    assert sent.get("response_type", "ephemeral") == "ephemeral" and sent.get("replace_original") is False
    [link] = [e["url"] for b in sent["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert f"signed in as <code>{STRANGER}</code>" in _signs_in(link, pages_daemon)
    clicked, key = bot.click(PAGE_LINK_ACTION, "r-000000000000", user=STRANGER)
    [unknown] = bot.replies(key, timeout_s=30)
    assert "r-000000000000" in unknown["text"] and "login?token" not in str(unknown)  # refused, no link

    monkeypatch.setenv("REPLAY_DAEMON_URL", pages_daemon.url)
    monkeypatch.setenv("REPLAY_API_TOKEN", pages_daemon.token)
    monkeypatch.setenv("REPLAY_USER", STRANGER)
    out, err = io.StringIO(), io.StringIO()
    code = main(["open"], out=out, err=err)

    assert code == EXIT_OK, err.getvalue()
    url, said = out.getvalue().splitlines()
    assert said.startswith("open it in your browser before ")
    assert f"signed in as <code>{STRANGER}</code>" in _signs_in(url, pages_daemon)
