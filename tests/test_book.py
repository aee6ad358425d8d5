"""The book: it builds with Sphinx warnings as errors, and every page works in a real browser.

The build executes every notebook at its defaults (Jupyter Book's cache, cold here) into a
temporary folder; Debian's chromium (installed by `make test`) is driven by playwright
without a browser download. Screenshots go to _build/test-output/.
"""
import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = REPO / "_build" / "test-output"


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(REPO), "--path-output", str(out), "-W", "-n", "--all"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out / "_build" / "html"


def test_book_pages_exist(html):
    for page in ("index.html", "book/intro.html", "book/methods.html", "book/results.html",
                 "book/reproducing.html", "book/api.html", "book/references.html",
                 "notebooks/01_collapse.html", "notebooks/07_proxy.html", "notebooks/08_monitor.html"):
        assert (html / page).is_file(), page
    # formulas are rendered by the vendored MathJax, not a CDN
    methods = (html / "book" / "methods.html").read_text()
    assert "_static/mathjax/tex-mml-chtml.js" in methods and "cdn.jsdelivr" not in methods
    assert (html / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(html):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


#: In the page: every table (HTML tables, and text tables printed into an output's <pre>) fits the text column
#: without a horizontal scroll bar, a text table without wrapping its lines, and no cell is elided (pandas'
#: "..." rows or columns, or a cell whose text is cut off). Returns one line per problem.
TABLE_CHECK = """() => {
  const problems = [];
  const column = document.querySelector("article") || document.querySelector("main") || document.body;
  const limit = column.getBoundingClientRect().right + 1;
  const label = (el) => (el.innerText || "").trim().split("\\n")[0].slice(0, 60);
  const scrolls = (el) => el.scrollWidth > el.clientWidth + 1;
  for (const table of column.querySelectorAll("table, .cell_output pre, .output pre")) {
    let cut = table.getBoundingClientRect().right > limit || scrolls(table);
    for (let el = table.parentElement; el && el !== column && !cut; el = el.parentElement) {
      cut = scrolls(el);
    }
    if (cut) problems.push(`table overflows its column: "${label(table)}"`);
    if (table.tagName !== "TABLE") {
      // the book wraps printed lines inside the column: fine for a sentence, not for a text table, whose
      // columns (runs of two or more spaces between words, on two lines or more) would no longer line up
      const tabular = table.innerText.split("\\n").filter((line) => /\\S {2,}\\S/.test(line)).length >= 2;
      const wrap = table.style.whiteSpace;
      table.style.whiteSpace = "pre";
      const wide = scrolls(table);
      table.style.whiteSpace = wrap;
      if (tabular && wide) problems.push(`text table wider than its column (wrapped): "${label(table)}"`);
      if (/^\\s*\\.\\.\\.\\s*$/m.test(table.innerText) || /\\s\\.\\.\\.\\s/.test(table.innerText.split("\\n")[0])) {
        problems.push(`text table elides rows or columns ("..."): "${label(table)}"`);
      }
      continue;
    }
    for (const cell of table.querySelectorAll("td, th")) {
      const text = (cell.innerText || "").trim();
      if (text === "..." || text === "\u2026" || scrolls(cell)) {
        problems.push(`elided cell "${text.slice(0, 40)}" in table "${label(table)}"`);
      }
    }
  }
  return problems;
}"""


@pytest.fixture(scope="module")
def browsed(html, site):
    """Every page opened once in Debian's chromium: (problems, table_problems, requests outside, pages)."""
    from playwright.sync_api import sync_playwright

    pages = sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                   if not p.relative_to(html).as_posix().startswith(("_", "reports/")))
    ids = {}  # page -> its element ids, for links with a fragment

    def page_ids(path):
        if path not in ids:
            ids[path] = set(re.findall(r'\sid="([^"]+)"', (html / path).read_text()))
        return ids[path]

    problems, table_problems, outside = [], [], []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})

        def route(request_route):
            if urlparse(request_route.request.url).netloc != urlparse(site).netloc:
                outside.append(request_route.request.url)
                return request_route.abort()
            return request_route.continue_()

        context.route("**/*", route)
        page = context.new_page()
        failed = []
        page.on("requestfailed", lambda r: failed.append(r.url))
        for path in pages:
            failed.clear()
            page.goto(f"{site}/{path}", wait_until="networkidle")
            broken = page.eval_on_selector_all(
                "img", "els => els.filter(e => !(e.complete && e.naturalWidth > 0)).map(e => e.src)")
            if broken:
                problems.append(f"{path}: images not loaded: {broken}")
            local_failures = [u for u in failed if urlparse(u).netloc == urlparse(site).netloc]
            if local_failures:
                problems.append(f"{path}: requests failed: {local_failures}")
            text = page.inner_text("body")
            if "Traceback (most recent call last)" in text or page.query_selector(".output.traceback, .output.error"):
                problems.append(f"{path}: shows a Python traceback")
            for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
                url, fragment = urldefrag(href)
                parsed = urlparse(url)
                if parsed.netloc != urlparse(site).netloc:
                    continue
                target = parsed.path.lstrip("/") or "index.html"
                if target.endswith("/"):
                    target += "index.html"
                if not (html / target).is_file():
                    problems.append(f"{path}: link to a missing page {href}")
                elif fragment and target.endswith(".html") and fragment not in page_ids(target):
                    problems.append(f"{path}: link to a missing anchor {href}")
            for problem in page.evaluate(TABLE_CHECK):
                table_problems.append(f"{path}: {problem}")
            if path == "book/methods.html":
                page.wait_for_selector("mjx-container", timeout=0)  # no wall-clock limit: wait until rendered
            if path in ("book/intro.html", "notebooks/01_collapse.html"):
                page.screenshot(path=str(SCREENSHOTS / (Path(path).stem + ".png")), full_page=True)
        browser.close()
    return problems, table_problems, outside, pages


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make test installs it)")
def test_every_page_in_a_browser(browsed):
    problems, _, outside, pages = browsed
    assert not outside, f"the site requested outside itself: {sorted(set(outside))[:10]}"
    assert not problems, "\n".join(problems[:30])
    assert len(pages) >= 10


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make test installs it)")
def test_no_table_overflows_its_column_or_is_elided(browsed):
    _, table_problems, _, _ = browsed
    assert not table_problems, "\n".join(table_problems[:40])
