"""End to end: `cardfit serve` on a free loopback port, the page driven in headless Chromium (Selenium), and
the numbers it shows checked against `python -m cardfit plan … --json` for the same inputs.

Set CARDFIT_SCREENSHOT=docs/screenshot.png to also save a screenshot of the filled page."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
    reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver); "
           "`.ci/run` installs them")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "cardfit", "serve", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tempfile.mkdtemp())
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/api/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"cardfit serve exited: {proc.stdout.read().decode()}")
                time.sleep(0.1)
        else:
            pytest.fail("cardfit serve did not answer within 10 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="cardfit-chromium-")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1280,1900", f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _wait(driver, cond, timeout=20.0):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # the page re-renders its tables while a condition reads them: an element found, then replaced before its
    # text is read, is read again at the next poll (a CI run failed on it once)
    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException,)).until(cond)


def _by_id(driver, id_):
    return driver.find_element("id", id_)


def _fill(driver, values: dict[str, str]) -> None:
    from selenium.webdriver.support.ui import Select

    for name, value in values.items():
        e = _by_id(driver, name)
        if e.tag_name == "select":
            Select(e).select_by_value(value)
        else:
            e.clear()
            e.send_keys(value)


def _shown(driver) -> dict:
    """What the page shows: memory bytes and texts, and the ranked cards."""
    mem = {}
    for key, id_ in (("weights_bytes", "mem-weights"), ("kv_cache_bytes", "mem-kv"),
                     ("overhead_bytes", "mem-overhead"), ("activation_bytes", "mem-activation"),
                     ("total_bytes", "mem-total")):
        e = _by_id(driver, id_)
        mem[key] = (int(e.get_attribute("data-bytes")), e.text)
    rows = driver.execute_script("""
        return [...document.querySelectorAll('#cards tbody tr')].map(tr => ({
          gpu_id: tr.dataset.gpu, gpu: tr.querySelector('.gpu').textContent,
          count: tr.querySelector('.count').textContent, verdict: tr.querySelector('.verdict').textContent,
          free: +tr.querySelector('.free').dataset.bytes, free_text: tr.querySelector('.free').textContent,
          usable: +tr.querySelector('.usable').dataset.bytes,
          usable_text: tr.querySelector('.usable').textContent,
          need: +tr.querySelector('.need').dataset.bytes, monthly: tr.querySelector('.monthly').textContent,
          tps: tr.querySelector('.tps').textContent}));""")
    return {"memory": mem, "cards": rows, "summary": _by_id(driver, "summary-inputs").text,
            "best": _by_id(driver, "summary-best").text}


def _gb(b: int) -> str:
    return f"{b / 1e9:.2f} GB"


def _expected(cli: dict) -> dict:
    m = cli["memory"]
    return {
        "memory": {k: (m[k], _gb(m[k])) for k in ("weights_bytes", "kv_cache_bytes", "overhead_bytes",
                                                 "activation_bytes", "total_bytes")},
        "cards": [{"gpu_id": g["gpu_id"], "gpu": g["gpu"], "count": str(g["count"]), "verdict": g["verdict"],
                   "free": g["free_bytes"], "free_text": _gb(g["free_bytes"]), "need": g["need_bytes"],
                   "usable": g["usable_bytes"], "usable_text": _gb(g["usable_bytes"]),
                   "monthly": "—" if g["monthly_usd"] is None else f"${g['monthly_usd']:,.0f}",
                   "tps": "—" if g["decode_tokens_per_s"] is None else f"{g['decode_tokens_per_s']:,.1f}"}
                  for g in cli["gpus"]],
    }


def _ready_for(driver, *words: str) -> None:
    _wait(driver, lambda d: all(w in d.find_element("id", "summary").text for w in words)
          and d.find_element("id", "status").text == "")


FORM = {"model": "qwen2.5:14b", "quant": "Q5_K_M", "context": "16384", "batch": "2", "runtime": "llama.cpp",
        "kv_dtype": "q8_0"}
CLI_ARGS = ["qwen2.5:14b", "--quant", "Q5_K_M", "--context", "16384", "--batch", "2", "--runtime",
            "llama.cpp", "--kv-dtype", "q8_0"]


def test_page_numbers_equal_the_cli(server, browser, run_json):
    browser.get(server + "/")
    _wait(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded") == "1")
    _fill(browser, FORM)
    _ready_for(browser, "Qwen2.5 14B", "Q5_K_M", "context 16,384", "2 sequences", "KV q8_0", "llama.cpp")
    cli = run_json("plan", *CLI_ARGS)
    shown = _shown(browser)
    expected = _expected(cli)
    assert shown["memory"] == expected["memory"]
    assert shown["cards"] == expected["cards"]
    best = cli["gpus"][0]
    assert shown["best"].startswith(f"Best: {best['count']}× {best['gpu']} — {best['verdict']}, "
                                    f"{_gb(best['free_bytes'])} free")
    # the charts were drawn: one memory bar per shown card, a speed line, and the cost crossings
    assert len(browser.find_elements("css selector", "#memory-chart rect.cap")) == min(12, len(cli["gpus"]))
    _wait(browser, lambda d: d.find_element("id", "speed-section").is_displayed()
          and d.find_element("id", "cost-section").is_displayed())
    assert browser.find_elements("css selector", "#speed-chart path.line-agg")
    assert browser.find_elements("css selector", "#cost-chart circle.cross")
    shot = os.environ.get("CARDFIT_SCREENSHOT")
    if shot:  # the whole page: grow the window to the document's height first
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1280, height + 140)
        time.sleep(0.5)
        browser.save_screenshot(str(ROOT / shot))
        browser.set_window_size(1280, 1900)


def test_the_url_holds_the_plan(server, browser, run_json):
    browser.get(server + "/")
    _wait(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded") == "1")
    _fill(browser, {"model": "llama3.1:8b", "gpu": "RTX 4090"})
    _ready_for(browser, "Llama 3.1 8B")
    # the answer to the model alone can arrive before the card is typed: wait for the link to hold both
    _wait(browser, lambda d: "gpu=RTX+4090" in d.find_element("id", "share-link").get_attribute("href"))
    _ready_for(browser, "Llama 3.1 8B")
    link = _by_id(browser, "share-link").get_attribute("href")
    assert "model=llama3.1%3A8b" in link and "gpu=RTX+4090" in link
    browser.get("about:blank")
    browser.get(link)  # a fresh load from the shared link alone
    _ready_for(browser, "Llama 3.1 8B")
    assert _by_id(browser, "gpu").get_attribute("value") == "RTX 4090"
    shown = _shown(browser)
    expected = _expected(run_json("plan", "llama3.1:8b", "--gpu", "RTX 4090"))
    assert shown["memory"] == expected["memory"] and shown["cards"] == expected["cards"]


def test_errors_show_the_cli_line(server, browser, run_cli):
    browser.get(server + "/#model=llama3.1:8b&context=1000000")
    _wait(browser, lambda d: d.find_element("id", "status").text.startswith("Error:"))
    code, _, err = run_cli("plan", "llama3.1:8b", "--context", "1000000")
    assert code == 2
    assert _by_id(browser, "status").text == err.strip()
    assert not _by_id(browser, "cards-section").is_displayed()  # no stale numbers next to an error


LLAMA_31_8B_CONFIG = {"_name_or_path": "meta-llama/Llama-3.1-8B", "model_type": "llama",
                      "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                      "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                      "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
                      "tie_word_embeddings": False}
OLLAMA_VERBOSE = "total duration: 5.91s\nprompt eval rate: 216.67 tokens/s\neval count: 232 token(s)\n" \
                 "eval duration: 5.57s\neval rate: 41.65 tokens/s\n"


def test_config_upload_and_pasted_log(server, browser, run_json, tmp_path):
    from selenium.common.exceptions import NoSuchElementException

    browser.get(server + "/")
    _wait(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded") == "1")
    try:
        upload = _by_id(browser, "config-file")
    except NoSuchElementException:  # pragma: no cover
        pytest.skip("no config.json upload on this page")
    if not _by_id(browser, "config-label").is_displayed() and _by_id(browser, "config-label").get_attribute(
        "hidden"
    ):
        pytest.skip("the readers module is not in this tree")
    _by_id(browser, "shape-box").click()
    _fill(browser, {"context": "8192", "gpu": "RTX 4090"})
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA_31_8B_CONFIG))
    upload.send_keys(str(cfg))  # the browser reads the file and posts its bytes; the server opens nothing
    _wait(browser, lambda d: d.find_element("id", "params").get_attribute("value") == "8030261248")
    _ready_for(browser, "Llama-3.1-8B", "context 8,192")
    assert _by_id(browser, "config-note").text.startswith("Llama-3.1-8B: 8.03B parameters, gqa")
    # planned from the uploaded config itself, exactly as the CLI plans the same file
    expected = _expected(run_json("plan", str(cfg), "--context", "8192", "--gpu", "RTX 4090"))
    shown = _shown(browser)
    assert shown["memory"] == expected["memory"] and shown["cards"] == expected["cards"]

    _by_id(browser, "log-box").click()
    _by_id(browser, "log").send_keys(OLLAMA_VERBOSE)
    _by_id(browser, "read-log").click()
    _wait(browser, lambda d: d.find_element("id", "tokens_per_s").get_attribute("value") == "41.65")
    _wait(browser, lambda d: "at 41.7 tokens/s" in d.find_element("id", "cost-note").text)


def _cli_cost_line(text: str) -> str:
    """`cardfit plan`'s cost line without its likely range and its per-API tail: what the page's note
    shows."""
    import re

    line = " ".join(text.split("Cost on ", 1)[1].split("\nnote:")[0].split())
    line = re.sub(r" \(likely [^)]*\)", "", "Cost on " + line)
    return line.split("; beats")[0].split("; never")[0]


def test_sets_show_their_capacity_once_and_the_cli_cost_line(server, browser, run_json, run_cli):
    """A set's usable bytes are already all its cards' (4× RTX 6000 Ada: about 206 GB, not 824 GB); the
    cost note is `cardfit plan`'s own cost line for the same inputs."""
    browser.get("about:blank")
    browser.get(server + "/#model=llama3.1:70b&quant=bf16&context=8192&runtime=vllm")
    _ready_for(browser, "Llama 3.1 70B", "BF16")
    cli = run_json("plan", "llama3.1:70b", "--quant", "bf16", "--context", "8192", "--runtime", "vllm")
    shown = _shown(browser)
    assert shown["cards"] == _expected(cli)["cards"]
    ada = next(r for r in shown["cards"] if r["gpu"] == "RTX 6000 Ada" and r["count"] == "4")
    assert 200e9 < ada["usable"] < 210e9
    bars = browser.execute_script("return [...document.querySelectorAll('#memory-chart text')]"
                                  ".map(t => t.textContent).filter(t => t.includes(' of '))")
    assert len(bars) == min(12, len(cli["gpus"]))
    for row, bar in zip(cli["gpus"], bars, strict=False):
        assert bar.startswith(f"{_gb(row['need_bytes'])} of {_gb(row['usable_bytes'])}")
    _wait(browser, lambda d: d.find_element("id", "cost-section").is_displayed())
    code, text, _ = run_cli("plan", "llama3.1:70b", "--quant", "bf16", "--context", "8192", "--runtime",
                            "vllm")
    assert code == 0
    assert _by_id(browser, "cost-note").text == _cli_cost_line(text)
    assert "over 720 h" in _by_id(browser, "cost-note").text


def test_offload_summary_and_long_card_names(server, browser, run_json):
    """An offload is described as the share on the GPU and the bytes in system RAM, not "−27.66 GB free";
    the longest card names in the memory chart stay inside it."""
    browser.get("about:blank")
    browser.get(server + "/#model=deepseek-r1:70b&gpu=RTX+4090")
    _ready_for(browser, "DeepSeek-R1-Distill-Llama-70B")
    g = run_json("plan", "deepseek-r1:70b", "--gpu", "RTX 4090")["gpus"][0]
    assert g["verdict"] == "offload" and g["free_bytes"] < 0
    best = _by_id(browser, "summary-best").text
    assert best.startswith(f"Best: 1× RTX 4090 — offload, {round(100 * g['gpu_layer_fraction'])}% of the "
                           f"layers on the GPU, about {_gb(-g['free_bytes'])} in system RAM")
    assert "-" not in best.split("·")[0]
    browser.get("about:blank")
    browser.get(server + "/#model=llama3.1:405b&quant=bf16&context=8192")
    _ready_for(browser, "Llama 3.1 405B")
    lefts = browser.execute_script(
        "return [...document.querySelectorAll('#memory-chart text.card-name')].map(t => t.getBBox().x)")
    assert lefts and min(lefts) >= 0


def test_serve_a_load_panel_equals_the_cli(server, browser, run_json):
    """The "Serve a load" panel: workload and targets in, the cheapest deployment, its command and the Pareto
    chart out, the same as `cardfit deploy … --json`."""
    browser.get(server + "/")
    _wait(browser, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded") == "1")
    _fill(browser, {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "L40S"})
    _fill(browser, {"d-users": "16", "d-input": "1000", "d-output": "300", "d-ttft": "2000", "d-tpot": "50",
                    "d-runtime": "vllm"})
    _by_id(browser, "d-go").click()
    _wait(browser, lambda d: d.find_element("id", "deploy-command").text.strip() != ""
          and d.find_element("id", "deploy-status").text == "", timeout=60)
    cli = run_json("deploy", "meta-llama/Llama-3.1-8B-Instruct", "--users", "16", "--input-tokens", "1000",
                   "--output-tokens", "300", "--ttft-ms", "2000", "--tpot-ms", "50", "--runtime", "vllm",
                   "--gpu", "L40S")
    best = cli["best"]
    assert _by_id(browser, "deploy-command").text.strip() == best["command"]
    text = _by_id(browser, "deploy-best").text
    assert (
        text.startswith("Cheapest that meets every target:") and f"${best['monthly_usd']:,.0f}/month" in text
    )
    assert len(browser.find_elements("css selector", "#deploy-chart circle.dot")) == len(cli["pareto"])
    assert len(browser.find_elements("css selector", "#deploy-pareto tbody tr")) == len(cli["pareto"])


def _load(driver, url: str) -> None:
    driver.get("about:blank")
    driver.get(url)
    _wait(driver, lambda d: d.find_element("tag name", "body").get_attribute("data-loaded") == "1")


def _deploy(driver, values: dict[str, str]) -> None:
    _fill(driver, values)
    _by_id(driver, "d-go").click()
    _wait(driver, lambda d: d.find_element("id", "deploy-best").text.strip() != ""
          and d.find_element("id", "deploy-status").text == "", timeout=90)


LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def test_a_pasted_link_is_a_new_question(server, browser, run_json):
    """Issue 25 item 8: a link pasted over the page kept the previous GPU filter, quantization and deploy
    load, and the old deployment stayed on screen. Every field now comes from the link or goes back to its
    default, and no answer to the old question is left."""
    _load(browser, server + f"/#model={LLAMA_8B}&quant=fp8&gpu=L40S&gpus=1&runtime=vllm&batch=4"
                            "&kv_offload_gb=64&speculative=eagle3&speculative_topk=1"
                            "&speculative_draft_tokens=8")
    _ready_for(browser, "Llama 3.1 8B", "FP8", "4 sequences")
    _deploy(browser, {"d-users": "16", "d-tpot": "70", "d-input": "2000", "d-runtime": "vllm",
                      "d-release": "0.10.1", "d-turns": "3", "d-sessions": "40", "d-prefix": "100",
                      "d-prefix-groups": "4", "d-cards": "2"})
    assert _by_id(browser, "deploy-section").is_displayed()
    browser.execute_script("location.hash = arguments[0]", "model=llama3.1:70b&context=8192")  # same page
    _ready_for(browser, "Llama 3.1 70B", "context 8,192", "1 sequence")
    for f in ("quant", "gpu", "gpus", "runtime", "batch", "kv_dtype", "kv_offload_gb", "speculative",
              "speculative_topk", "speculative_draft_tokens", "d-users", "d-rate", "d-input", "d-output",
              "d-ttft", "d-tpot", "d-runtime", "d-release",
              "d-turns", "d-sessions", "d-prefix", "d-prefix-groups", "d-cards"):
        assert _by_id(browser, f).get_attribute("value") == "", f
    assert not _by_id(browser, "deploy-section").is_displayed()
    assert _by_id(browser, "deploy-command").text == "" and not browser.find_elements(
        "css selector", "#deploy-pareto tbody tr") and not browser.find_elements("css selector",
                                                                                 "#deploy-details li")
    cli = run_json("plan", "llama3.1:70b", "--context", "8192")
    assert _shown(browser)["cards"] == _expected(cli)["cards"]


def test_a_changed_model_clears_its_deployment(server, browser):
    """The deployment shown is for the model above it: another model takes it off the screen."""
    _load(browser, server + f"/#model={LLAMA_8B}&gpu=L40S")
    _ready_for(browser, "Llama 3.1 8B")
    _deploy(browser, {"d-users": "16", "d-runtime": "vllm"})
    _fill(browser, {"model": "qwen2.5:14b"})
    _ready_for(browser, "Qwen2.5 14B")
    assert not _by_id(browser, "deploy-section").is_displayed()


def test_the_card_count_asks_for_a_set(server, browser, run_json):
    """"70B on 2× RTX 4090" can be asked: the page's card count is `plan --gpus N`. On one card llama.cpp
    offloads, and the page shows the plan's own notes: the system RAM it needs and the 2-card speed."""
    args = ("llama3.1:70b", "--quant", "Q4_K_M", "--runtime", "llama.cpp", "--gpu", "RTX 4090")
    _load(browser, server + "/#model=llama3.1:70b&quant=Q4_K_M&runtime=llama.cpp&gpu=RTX+4090")
    _ready_for(browser, "Llama 3.1 70B", "llama.cpp")
    one = run_json("plan", *args)
    assert _shown(browser)["cards"] == _expected(one)["cards"] and one["gpus"][0]["verdict"] == "offload"
    summary = _by_id(browser, "summary").text
    assert any("2× RTX 4090 hold the whole model" in n for n in one["notes"])
    for note in one["notes"]:
        assert "note: " + note in summary
    _fill(browser, {"gpus": "2"})
    _wait(browser, lambda d: "gpus=2" in d.find_element("id", "share-link").get_attribute("href"))
    _wait(browser, lambda d: d.find_element("css selector", "#cards tbody tr .count").text == "2")
    _ready_for(browser, "Llama 3.1 70B")
    two = run_json("plan", *args, "--gpus", "2")
    assert _shown(browser)["cards"] == _expected(two)["cards"]
    assert _by_id(browser, "summary-best").text.startswith(f"Best: 2× RTX 4090 — {two['gpus'][0]['verdict']}")


def test_deploy_defaults_are_the_clis(server, browser, run_json):
    """The targets and lengths left empty are `cardfit deploy`'s own defaults, read from the API's schema (the
    page said TPOT 50 ms where the CLI used 100)."""
    _load(browser, server + f"/#model={LLAMA_8B}&gpu=L40S")
    _ready_for(browser, "Llama 3.1 8B")
    cli = run_json("deploy", LLAMA_8B, "--users", "16", "--runtime", "vllm", "--gpu", "L40S")
    w = cli["workload"]
    for id_, key in (("d-input", "input_tokens"), ("d-output", "output_tokens"), ("d-ttft", "ttft_ms"),
                     ("d-tpot", "tpot_ms")):
        assert _by_id(browser, id_).get_attribute("placeholder") == f"default {w[key]:,.0f}", id_
    _deploy(browser, {"d-users": "16", "d-runtime": "vllm"})
    assert _by_id(browser, "deploy-load").text == (
        f"16 users · {w['input_tokens']:,} + {w['output_tokens']:,} tokens · TTFT ≤ {w['ttft_ms']:,.0f} ms · "
        f"TPOT ≤ {w['tpot_ms']:,.0f} ms")
    assert _by_id(browser, "deploy-command").text.strip() == cli["best"]["command"]


def test_a_missed_target_is_said_in_words(server, browser, run_cli):
    """"ttft_ms fails first" was the JSON key; the page says what the CLI says: "TTFT p90 fails first"."""
    import json

    _load(browser, server + f"/#model={LLAMA_8B}&gpu=L40S")
    _ready_for(browser, "Llama 3.1 8B")
    _deploy(browser, {"d-users": "16", "d-runtime": "vllm", "d-ttft": "1"})
    code, out, _ = run_cli("deploy", LLAMA_8B, "--users", "16", "--runtime", "vllm", "--gpu", "L40S",
                           "--ttft-ms", "1", "--json")
    assert code == 3  # no answer: the report, then one Error line and status 3
    f = json.loads(out)["failing"]
    assert f["target"] == "ttft_ms"
    text = _by_id(browser, "deploy-best").text
    assert text.startswith(f"Nothing meets the targets: TTFT p90 fails first ({f['achieved']:,.1f} ms "
                           f"against {f['limit']:,.0f} ms, {f['ratio']:,.2f}×)")
    assert "_ms" not in _by_id(browser, "deploy-section").text


OVERLAPS = """
const out = {};
for (const svg of document.querySelectorAll('.chart svg')) {
  const ts = [...svg.querySelectorAll('text')].map((t) => ({ t: t.textContent, b: t.getBBox() }));
  const bad = [];
  for (let i = 0; i < ts.length; i++) for (let j = i + 1; j < ts.length; j++) {
    const a = ts[i].b, b = ts[j].b;  // 1 px of slack: boxes include the glyphs' line gap
    const apart = a.x + a.width - 1 <= b.x || b.x + b.width - 1 <= a.x || a.y + a.height - 1 <= b.y ||
      b.y + b.height - 1 <= a.y;
    if (!apart)
      bad.push([ts[i].t, ts[j].t]);
  }
  const s = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal;
  const outside = ts.filter((x) => x.b.x < 0 || x.b.x + x.b.width > vb.width + 1).map((x) => x.t);
  out[svg.parentElement.id] = { overlaps: bad, outside: outside, drawn: s.width > 0 };
}
return out;
"""


@pytest.mark.parametrize("width", [1280, 390])
def test_no_horizontal_overflow_and_no_colliding_labels_after_a_deploy(server, browser, width):
    """Issue 25 item 8: the page overflowed at 1280 px after a deploy (long Pareto rows) and at phone width;
    chart labels collided. The document is never wider than the window, and no two labels of a chart
    overlap or leave it."""
    try:
        if width < 500:  # a desktop window cannot be that narrow: emulate the phone's viewport
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": width, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        else:
            browser.set_window_size(width, 900)
        _load(browser, server + "/#model=llama3.1:70b")
        _ready_for(browser, "Llama 3.1 70B")
        _wait(browser, lambda d: d.find_element("id", "cost-section").is_displayed())
        _deploy(browser, {"d-users": "200"})
        assert browser.find_elements("css selector", "#deploy-chart circle.dot")
        inner = browser.execute_script("return innerWidth")
        assert inner == width or width >= 500
        assert browser.execute_script("return document.scrollingElement.scrollWidth") <= inner
        charts = browser.execute_script(OVERLAPS)
        assert {"memory-chart", "cost-chart", "deploy-chart"} <= set(charts)
        for name, c in charts.items():
            assert c["overlaps"] == [] and c["outside"] == [], name
    finally:
        if width < 500:
            browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        browser.set_window_size(1280, 1900)


@pytest.mark.parametrize("link", ["#model=qwen2.5:14b", "#model=llama3.1:405b&quant=bf16&context=8192",
                                  "#model=llama3.1:8b&gpu=RTX+4090&tokens_per_s=41.65"])
def test_chart_labels_do_not_collide(server, browser, link):
    """Cost crossings close together (qwen2.5:14b: 12.7 M and 38.0 M), the longest card names, a measured
    tokens/s: every chart's labels clear of each other and inside the chart."""
    _load(browser, server + "/" + link)
    _ready_for(browser, "")
    _wait(browser, lambda d: d.find_element("id", "cost-section").is_displayed())
    for name, c in browser.execute_script(OVERLAPS).items():
        assert c["overlaps"] == [] and c["outside"] == [], name


def test_stack_panel_equals_the_cli(server, browser, run_json):
    """The "Several models on one machine" panel: the RAG example it opens with, planned, shows the bytes of
    every model per card and the bundle of `cardfit stack examples/stacks/rag-4090.toml --json`."""
    _load(browser, server + "/")
    _by_id(browser, "stack-go").click()
    _wait(browser, lambda d: d.find_element("id", "stack-bundle").text.strip() != "", timeout=60)
    cli = run_json("stack", str(ROOT / "examples" / "stacks" / "rag-4090.toml"))
    rows = browser.execute_script("""
        return [...document.querySelectorAll('#stack-cards tbody tr')].map(
          tr => [...tr.cells].map(c => c.textContent));""")
    expected = [e for d in cli["devices"] for e in d["entries"]]
    assert [r[0] for r in rows] == [e["model"] for e in expected]
    assert [r[5] for r in rows] == [_gb(e["bytes"]) for e in expected]
    assert _by_id(browser, "stack-verdict").text == cli["verdict"]
    assert _by_id(browser, "stack-bundle").get_attribute("textContent") == cli["bundle"]["text"]
    assert browser.execute_script("return document.scrollingElement.scrollWidth") <= \
        browser.execute_script("return innerWidth")


def test_api_prices_on_the_page_are_the_clis(server, browser, run_json):
    """The page's API choice shows each API's input, cached-input and output prices and their date, as
    `cardfit apis --json` lists them (one price table: CLI = web API = page)."""
    _load(browser, server + f"/#model={LLAMA_8B}&gpu=L40S")
    _ready_for(browser, "Llama 3.1 8B")
    shown = browser.execute_script("return Object.fromEntries([...document.querySelectorAll('#api option')]"
                                   ".map(o => [o.value, o.text]))")
    rows = run_json("apis")["apis"]
    assert rows
    for a in rows:
        cached = "" if a["cached_input_usd_per_m"] is None else f" · cached ${a['cached_input_usd_per_m']:g}"
        date = f", {a['date']}" if a["date"] else ""
        assert shown[a["id"]] == (f"{a['name']} (in ${a['input_usd_per_m']:g}{cached} · out "
                                  f"${a['output_usd_per_m']:g} per M{date})"), a["id"]


def _details(driver) -> dict[str, str]:
    return driver.execute_script("return Object.fromEntries([...document.querySelectorAll("
                                 "'#deploy-details li')].map(li => [li.dataset.key, li.textContent]))")


def _pools(pd: dict) -> str:
    """The page's pools line (app.js pool()), each worker's split named as the CLI names it (cli/deploy_cmd.py
    _worker: "TP 4", or "attention DP 8 · EP 8" for a pool of attention groups and experts)."""
    from cardfit.cli.deploy_cmd import _worker

    def one(name: str, p: dict) -> str:
        workers = f"{p['replicas']:,} {name} worker{'' if p['replicas'] == 1 else 's'}"
        split = _worker(p).removeprefix(" of ")
        return f"{workers} of {p['count']}× {p['gpu']}" + (f" ({split})" if split else "")

    return f"{one('prefill', pd['prefill'])} + {one('decode', pd['decode'])}"


def test_prefill_decode_pools_and_expert_parallel_rows_are_shown(server, browser, run_json):
    """Issue 26: DeepSeek-V3 on H200s for 512 users with 8,000-token prompts, prefill and decode workers
    weighed against one pool. The page shows the comparison's winner and reason as `cardfit deploy … --json`
    has them, the best deployment's launch line(s), its pools where the winner is apart, and the
    attention-DP / expert-parallel layout of any Pareto row that has one. (Since 2026-12-07, with SGLang
    0.5.23 current, no P/D record is on the user path: the disaggregated band is every release's, TPOT up to
    1 / 0.227 of the prediction, and one pool wins this case; TPOT target 60 -> 400 ms so a split meets.)"""
    args = ["deploy", "deepseek-v3", "--users", "512", "--input-tokens", "8000", "--output-tokens", "1000",
            "--ttft-ms", "60000", "--tpot-ms", "400", "--gpu", "H200", "--runtime", "sglang"]
    cli = run_json(*args)
    best, pd = cli["best"], cli["disaggregation"]
    assert pd["winner"] in ("aggregated", "disaggregated") and pd["deployment"] is not None
    _load(browser, server + "/#model=deepseek-v3&gpu=H200")
    _ready_for(browser, "DeepSeek")
    _deploy(browser, {"d-users": "512", "d-input": "8000", "d-output": "1000", "d-ttft": "60000",
                      "d-tpot": "400", "d-runtime": "sglang"})
    shown = _details(browser)
    assert _by_id(browser, "deploy-command").get_attribute("textContent") == best["command"]
    if pd["winner"] == "disaggregated":
        pre, dec = best["disaggregated"]["prefill"], best["disaggregated"]["decode"]
        assert f"{best['count']}× {best['gpu']} ({pre['replicas']} prefill + {dec['replicas']} decode " \
            "workers" in _by_id(browser, "deploy-best").text
        assert shown["pools"].startswith(f"pools: {_pools(best['disaggregated'])}, each started by")
        assert shown["disaggregation"] == f"Prefill and decode apart: {pd['why']}"
        assert len(best["command"].splitlines()) == 2
    else:
        apart = pd["deployment"]
        pools = f"{_pools(apart['disaggregated'])}, ${apart['monthly_usd']:,.0f}/month"
        assert shown["disaggregation"] == f"Prefill and decode together: {pd['why']} (its pools: {pools})"
    # any Pareto row with an attention-DP / EP layout shows it (a case that has one:
    # test_an_expert_parallel_deployment_shows_its_layout)
    layouts = [d for d in cli["pareto"] if d["ep"] > 1]
    rows = [r.text for r in browser.find_elements("css selector", "#deploy-pareto tbody tr td:first-child")]
    for d in layouts:
        assert any(f"attention DP {d['dp']} · EP {d['ep']}" in r and r.startswith(f"{d['count']}× ")
                   for r in rows)


def test_pools_of_two_splits_show_each_pools_own(server, browser, run_cli, run_json):
    """aiconfigurator's 16-card Qwen3-32B-FP8 question (tests/test_disagg.py _AIC_16): deploy's cheapest runs
    its prefill workers on fewer cards than its decode workers, and the page names each pool's split as the
    CLI's text does (it printed the decode worker's TP as both pools', "TP 2 each")."""
    args = ["deploy", "qwen3-32b", "--users", "384", "--input-tokens", "4000", "--output-tokens", "500",
            "--ttft-ms", "4000", "--tpot-ms", "17.4", "--gpu", "H200", "--runtime", "sglang",
            "--quant", "fp8"]
    b = run_json(*args)["best"]
    pre, dec = b["disaggregated"]["prefill"], b["disaggregated"]["decode"]
    assert pre["tp"] < dec["tp"]  # the case the test is for

    def workers(p: dict, role: str) -> str:
        n = p["replicas"]
        return f"{n} {role} worker{'' if n == 1 else 's'}" + (f" of TP {p['tp']}" if p["tp"] > 1 else "")

    shape = f"{b['count']}× {b['gpu']} ({workers(pre, 'prefill')} + {workers(dec, 'decode')})"
    assert shape in " ".join(run_cli(*args)[1].split())
    _load(browser, server + "/#model=qwen3-32b&gpu=H200&quant=fp8")
    _ready_for(browser, "Qwen3 32B")
    _deploy(browser, {"d-users": "384", "d-input": "4000", "d-output": "500", "d-ttft": "4000",
                      "d-tpot": "17.4", "d-runtime": "sglang"})
    assert shape in _by_id(browser, "deploy-best").text


def test_an_aggregated_winner_says_why_and_shows_the_pools_it_beat(server, browser, run_json):
    """Where prefill and decode together are cheaper, the page says so with the reason, and names the pools
    of the cheapest deployment apart that it beat (the CLI's --json carries them either way)."""
    args = ["deploy", "deepseek-v3", "--users", "64", "--input-tokens", "8000", "--output-tokens", "300",
            "--ttft-ms", "30000", "--tpot-ms", "80", "--gpu", "H200", "--runtime", "sglang", "--quant", "fp8"]
    cli = run_json(*args)
    pd = cli["disaggregation"]
    _load(browser, server + "/#model=deepseek-v3&gpu=H200&quant=fp8")
    _ready_for(browser, "DeepSeek")
    _deploy(browser, {"d-users": "64", "d-input": "8000", "d-output": "300", "d-ttft": "30000",
                      "d-tpot": "80", "d-runtime": "sglang"})
    assert pd["winner"] == "aggregated" and pd["deployment"] is not None  # the case the test is for
    assert cli["best"]["disaggregated"] is None
    line, apart = _details(browser)["disaggregation"], pd["deployment"]
    assert line == (f"Prefill and decode together: {pd['why']} (its pools: "
                    f"{_pools(apart['disaggregated'])}, ${apart['monthly_usd']:,.0f}/month)")
    assert "pools" not in _details(browser)


def test_kv_offload_field_in_plan_speed_and_deploy(server, browser, run_json):
    """Issue 26: `--kv-offload-gb` on the page. In a plan its note (the RAM it holds, whether it helps on the
    card) is the CLI's and the link keeps it; in "Serve a load" with long multi-turn sessions the deployment
    runs a host tier, as `cardfit deploy --kv-offload-gb` chooses."""
    plan_args = ["plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100 SXM", "--gpus", "2", "--quant",
                 "fp8", "--context", "32768", "--runtime", "vllm", "--kv-offload-gb", "400"]
    cli = run_json(*plan_args)
    offload = [n for n in cli["notes"] if n.startswith("KV offload")]
    assert len(offload) == 1 and "helps where the workload reuses" in offload[0]
    _load(browser, server + "/#model=meta-llama/Llama-3.1-70B-Instruct&gpu=H100+SXM&gpus=2&quant=fp8"
                            "&context=32768&runtime=vllm")
    _ready_for(browser, "Llama 3.1 70B")
    assert "KV offload" not in _by_id(browser, "summary").text
    _fill(browser, {"kv_offload_gb": "400"})
    _wait(browser, lambda d: "kv_offload_gb=400" in d.find_element("id", "share-link").get_attribute("href"))
    _ready_for(browser, "note: " + offload[0])
    assert _shown(browser)["cards"] == _expected(cli)["cards"]
    dep = run_json("deploy", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100 SXM", "--runtime", "vllm",
                   "--requests-per-s", "5", "--sessions", "3000", "--turns", "10", "--input-tokens", "2000",
                   "--output-tokens", "500", "--ttft-ms", "3000", "--tpot-ms", "60",
                   "--kv-offload-gb", "1000")
    best = dep["best"]
    assert best["kv_offload_gb"] == 1000.0
    _fill(browser, {"kv_offload_gb": "1000"})  # deploy takes the model, card filter and tier from above
    _deploy(browser, {"d-rate": "5", "d-sessions": "3000", "d-turns": "10", "d-input": "2000",
                      "d-output": "500", "d-ttft": "3000", "d-tpot": "60", "d-runtime": "vllm"})
    text = _by_id(browser, "deploy-best").text
    assert f"${best['monthly_usd']:,.0f}/month" in text and " · 1,000 GB host KV tier" in text
    assert f"prefix cache {best['prefix_hit_rate'] * 100:,.0f}% of the prompt" in text
    assert "3,000 sessions open" in _by_id(browser, "deploy-load").text
    assert _by_id(browser, "deploy-command").get_attribute("textContent") == best["command"]


def test_speculative_decoding_of_the_deployment_is_shown(server, browser, run_json):
    """A deployment that drafts (--speculative eagle3, chosen over the same search without it) says so under
    it in the CLI's words: method, tokens drafted a step, acceptance, tokens a step."""
    cli = run_json("deploy", LLAMA_8B, "--users", "4", "--gpu", "L40S", "--runtime", "vllm",
                   "--speculative", "eagle3")
    sp = cli["best"]["speculative"]
    assert sp is not None and sp["method"] == "eagle3"
    _load(browser, server + f"/#model={LLAMA_8B}&gpu=L40S&speculative=eagle3")
    _ready_for(browser, "Llama 3.1 8B")
    _deploy(browser, {"d-users": "4", "d-runtime": "vllm"})
    assert _details(browser)["speculative"] == (
        f"speculative decoding: {sp['method']}, {sp['tokens']} tokens drafted a step at acceptance "
        f"{sp['acceptance']:g} ({sp['tokens_per_step']:g} tokens a step)")
    assert _by_id(browser, "deploy-command").get_attribute("textContent") == cli["best"]["command"]


def test_a_tree_of_drafts_is_asked_and_shown(server, browser, run_json):
    """The page asks SGLang's tree (top-k and tokens verified beside the speculative field, sent to deploy as
    --speculative-topk / --speculative-draft-tokens) and names its shape under the deployment as the CLI
    does; before, it had no such fields and its line named K alone."""
    cli = run_json("deploy", LLAMA_8B, "--users", "4", "--gpu", "L40S", "--runtime", "sglang",
                   "--speculative", "eagle3", "--speculative-topk", "4", "--speculative-draft-tokens", "8")
    sp = cli["best"]["speculative"]
    assert sp is not None and (sp["topk"], sp["draft_tokens"]) == (4, 8)
    _load(browser, server + f"/#model={LLAMA_8B}&gpu=L40S&runtime=sglang&speculative=eagle3"
                            "&speculative_topk=4&speculative_draft_tokens=8")  # plan's runtime: a tree
    _ready_for(browser, "Llama 3.1 8B")
    _deploy(browser, {"d-users": "4", "d-runtime": "sglang"})
    assert _details(browser)["speculative"] == (
        f"speculative decoding: {sp['method']}, a tree of {sp['tokens']} draft steps at top-4, 8 tokens "
        f"verified a step, at acceptance {sp['acceptance']:g} ({sp['tokens_per_step']:g} tokens a step)")
    assert _by_id(browser, "deploy-command").get_attribute("textContent") == cli["best"]["command"]
    assert "--speculative-eagle-topk 4 --speculative-num-draft-tokens 8" in cli["best"]["command"]


def test_an_expert_parallel_deployment_shows_its_layout(server, browser, run_json):
    """DeepSeek-V3 for 512 users on H200s with SGLang is cheapest as one 8-card replica with attention
    data-parallel and the experts expert-parallel: the page names the layout as the CLI does and says what
    each part is."""
    cli = run_json("deploy", "deepseek-v3", "--users", "512", "--input-tokens", "1000", "--output-tokens",
                   "1000", "--ttft-ms", "5000", "--tpot-ms", "100", "--gpu", "H200", "--runtime", "sglang")
    b = cli["best"]
    assert b["ep"] > 1 and b["dp"] > 1 and b["disaggregated"] is None  # the case the test is for
    _load(browser, server + "/#model=deepseek-v3&gpu=H200")
    _ready_for(browser, "DeepSeek")
    _deploy(browser, {"d-users": "512", "d-input": "1000", "d-output": "1000", "d-ttft": "5000",
                      "d-tpot": "100", "d-runtime": "sglang"})
    group = b["tp"] // b["dp"]
    layout = (f"TP {group} × " if group > 1 else "") + f"attention DP {b['dp']} · EP {b['ep']}"
    assert f"{b['count']}× {b['gpu']} ({layout}" in _by_id(browser, "deploy-best").text
    assert _details(browser)["moe"] == (f"each replica: attention data-parallel over {b['dp']} groups of TP "
                                        f"{group}, experts expert-parallel over {b['ep']} cards")
    assert _by_id(browser, "deploy-command").get_attribute("textContent") == b["command"]
