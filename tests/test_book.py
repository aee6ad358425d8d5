"""The book: it builds with Sphinx warnings as errors, and every page works in a real browser.

The build executes every notebook at its defaults (Jupyter Book's cache, cold here) into a
temporary folder; Debian's chromium (installed by `make test`) is driven by playwright
without a browser download. The first screen of every section page, as a reader at 1280 px sees it, is
saved under _build/screenshots/ (CI keeps it as an artefact).
"""
import functools
from html.parser import HTMLParser
import http.server
import re
import struct
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest

from geomcap.analysis.display import ABSOLUTE_PATH

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = REPO / "_build" / "screenshots"

#: a section page: a claim's notebook, and the results page that gathers them
SECTION_PAGES = re.compile(r"^(notebooks/\d\d_[\w-]+|book/results)\.html$")

#: the first screen a reader sees: a section's first figure starts within this many pixels of the page top
FIRST_SCREEN_PX = 1200


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


class _CellOutputs(HTMLParser):
    """The text of a page's cell outputs (myst-nb's ``cell_output`` blocks, glued values excepted), and the
    number of stderr outputs among them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.stack, self.texts, self.stderr, self.images = 0, [], [], 0, []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag in ("br", "img", "hr", "meta", "link", "input", "wbr"):
            if tag == "img" and self.depth:
                self.images.append(dict(attrs).get("src", ""))
            return
        inside = "cell_output" in classes
        self.stack.append(inside)
        self.depth += inside
        self.stderr += bool(self.depth) and "stderr" in classes

    def handle_endtag(self, tag):
        if tag in ("br", "img", "hr", "meta", "link", "input", "wbr") or not self.stack:
            return
        self.depth -= self.stack.pop()

    def handle_data(self, data):
        if self.depth:
            self.texts.append(data)


def cell_outputs(page: Path) -> _CellOutputs:
    parser = _CellOutputs()
    parser.feed(page.read_text())
    return parser


#: what no cell output may show: a warning, a traceback, an absolute path of the machine that built the book
MACHINE_OUTPUT = re.compile(rf"Warning|Traceback|{ABSOLUTE_PATH.pattern}")


def test_no_cell_output_shows_the_machine(html):
    """Every page, 04 and 08 included: no warning, traceback, stderr or absolute path in what a cell printed."""
    problems = []
    for page in sorted(html.rglob("*.html")):
        name = page.relative_to(html).as_posix()
        if name.startswith("_"):
            continue
        outputs = cell_outputs(page)
        text = " ".join(outputs.texts)
        for match in MACHINE_OUTPUT.finditer(text):
            problems.append(f"{name}: ...{text[max(0, match.start() - 60):match.end() + 40]}...")
        if outputs.stderr:
            problems.append(f"{name}: {outputs.stderr} stderr output(s)")
    assert not problems, "\n".join(problems[:20])


def _png_width(path: Path) -> int:
    with path.open("rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">I", head[16:20])[0]


def test_section_figures_are_no_wider_than_their_text_can_be(html):
    """A figure wider than ``plots.style.max_figure_width()`` inches is scaled down in the text column until
    its smallest text shows under ``MIN_SCREEN_PT``: every figure a section saved fits (tests/
    test_figure_readability.py checks each figure function's text against the same width)."""
    from geomcap.plots import style

    widest = style.max_figure_width()
    problems, seen = [], 0
    for page in sorted(html.rglob("*.html")):
        name = page.relative_to(html).as_posix()
        if not SECTION_PAGES.match(name):
            continue
        for src in cell_outputs(page).images:
            image = (page.parent / src).resolve()
            if image.suffix != ".png":
                continue
            seen += 1
            inches = _png_width(image) / style.FIGURE_DPI
            if inches > widest + 0.05:
                problems.append(f"{name}: {image.name} is {inches:.1f} in wide (at most {widest:.1f})")
    assert seen >= 8, "the sections' figures were not found"
    assert not problems, "\n".join(problems)


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


#: In a section page: the first figure's top (page coordinates), the widths at which its figures show (and
#: their own), and the code blocks a reader sees whose lines run past their block.
READER_CHECK = """() => {
  const column = document.querySelector("article") || document.querySelector("main") || document.body;
  const figures = [...column.querySelectorAll(".cell_output img")];
  const first = figures.length ? figures[0].getBoundingClientRect().top + window.scrollY : null;
  const shown = figures.map((img) => [Math.round(img.getBoundingClientRect().width), img.naturalWidth]);
  const overflowing = [...column.querySelectorAll("pre")]
    .filter((pre) => !pre.closest(".cell_output") && pre.checkVisibility())  // not a folded one
    .filter((pre) => pre.scrollWidth > pre.clientWidth + 1)
    .map((pre) => pre.innerText.split("\\n").reduce((a, b) => (b.length > a.length ? b : a), "").slice(0, 90));
  return {first, shown, overflowing};
}"""


@pytest.fixture(scope="module")
def browsed(html, site):
    """Every page opened once in Debian's chromium: (problems, table_problems, requests outside, pages,
    reader_problems)."""
    from playwright.sync_api import sync_playwright

    pages = sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                   if not p.relative_to(html).as_posix().startswith(("_", "reports/")))
    ids = {}  # page -> its element ids, for links with a fragment

    def page_ids(path):
        if path not in ids:
            ids[path] = set(re.findall(r'\sid="([^"]+)"', (html / path).read_text()))
        return ids[path]

    problems, table_problems, outside, reader_problems = [], [], [], []
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
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
            if SECTION_PAGES.match(path):
                reader = page.evaluate(READER_CHECK)
                # the figures show at the width the figure style is made for (plots.style.BOOK_FIGURE_PX)
                from geomcap.plots import style

                for shown, natural in reader["shown"]:
                    if abs(shown - min(natural, style.BOOK_FIGURE_PX)) > 2:
                        reader_problems.append(f"{path}: a {natural} px figure shows {shown} px wide, not "
                                               f"{min(natural, style.BOOK_FIGURE_PX)}")
                if reader["first"] is None or reader["first"] > FIRST_SCREEN_PX:
                    reader_problems.append(f"{path}: first figure at {reader['first']} px, below the first "
                                           f"screen ({FIRST_SCREEN_PX} px)")
                for line in reader["overflowing"]:
                    reader_problems.append(f"{path}: a code line runs past its block: {line!r}")
                page.set_viewport_size({"width": 1280, "height": FIRST_SCREEN_PX})  # the first screen, as shown
                page.screenshot(path=str(SCREENSHOTS / (path.replace("/", "_").removesuffix(".html") + ".png")))
                page.set_viewport_size({"width": 1280, "height": 900})
            elif path == "book/intro.html":
                page.screenshot(path=str(SCREENSHOTS / "book_intro.png"), full_page=True)
        browser.close()
    return problems, table_problems, outside, pages, reader_problems


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make test installs it)")
def test_every_page_in_a_browser(browsed):
    problems, _, outside, pages, _ = browsed
    assert not outside, f"the site requested outside itself: {sorted(set(outside))[:10]}"
    assert not problems, "\n".join(problems[:30])
    assert len(pages) >= 10


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make test installs it)")
def test_no_table_overflows_its_column_or_is_elided(browsed):
    _, table_problems, _, _, _ = browsed
    assert not table_problems, "\n".join(table_problems[:40])


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make test installs it)")
def test_a_section_reads_question_figure_answer(browsed):
    """At 1280 px, as a reader opens it: each section page's first figure starts on the first screen, no code
    line a reader sees (the parameters cell; the others are folded) runs past its block, and figures show at
    the column width the figure style assumes. The first screens are saved under _build/screenshots/."""
    pages, reader_problems = browsed[3], browsed[4]
    assert len([p for p in pages if SECTION_PAGES.match(p)]) >= 8
    assert not reader_problems, "\n".join(reader_problems[:30])
    assert len(list(SCREENSHOTS.glob("notebooks_*.png"))) >= 7
