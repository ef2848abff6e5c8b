"""``s3rm collect-candidates`` on real inputs: files of this repository in a git checkout, a docs tree and a
Slack export.

Secrets of every kind docs/research-tools.md#secret-masking names are planted
(a real RSA key, a real JWT, random tokens in each provider's shape, drawn
from a fixed seed so every run plants the same values; explore mode,
``S3RM_HYPOTHESIS=explore``, draws a new seed and names it in a failure); none of them, nor any long piece of them, may appear in the
output, stdout, stderr (progress bars included) or the checkpoint. A second
run with the checkpoint writes only what changed.
"""
from __future__ import annotations

import base64
import json
import os
import random
import secrets
import string
import subprocess
import sys
from pathlib import Path

import pytest

from s3rm.collect.chunks import MAX_BODY_CHARS, MAX_LINES
from s3rm.collect.docs import sections_of
from s3rm.collect.secrets import mask_text
from s3rm.collect.slack import readable_text

ROOT = Path(__file__).resolve().parents[3]
ALNUM = string.ascii_letters + string.digits
#: The planted values' seed: fixed by default, new in explore mode (tests/conftest.py).
SEED = secrets.randbits(32) if os.environ.get("S3RM_HYPOTHESIS") == "explore" else 20261205


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_secrets(use: str) -> dict[str, str]:
    """One value per kind, drawn from :data:`SEED` and ``use`` (each use plants its own values, whatever
    tests run before it; never committed anywhere)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    rng = random.Random(f"{SEED}:{use}")

    def rand(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                            serialization.NoEncryption()).decode()
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": rand(10), "iat": 1700000000}).encode())
    return {
        "private_key": pem,
        "aws_access_key": "AKIA" + rand(16, string.ascii_uppercase + string.digits),
        "aws_secret_key": rand(40, ALNUM + "+/"),
        "google_api_key": "AIza" + rand(35, ALNUM + "_-"),
        "github_token": "gh" + "p_" + rand(36),
        "github_pat": "github" + "_pat_" + rand(22) + "_" + rand(59),
        "slack_token": "xo" + "xb-" + rand(12, string.digits) + "-" + rand(13, string.digits) + "-" + rand(24),
        "slack_webhook": "https://hooks.slack.com/services/T" + rand(8, string.ascii_uppercase + string.digits)
                         + "/B" + rand(8, string.ascii_uppercase + string.digits) + "/" + rand(24),
        "openai_key": "s" + "k-" + rand(48),
        "jwt": f"{header}.{payload}.{b64url(rng.randbytes(32))}",
        "url_password": "Pw" + rand(14),
        "connection_password": "Cs" + rand(14),
        "assigned_password": "As" + rand(14),
        "high_entropy": rand(44),
    }


def planted_text(s: dict[str, str]) -> str:
    """A config-like text carrying every planted secret in its usual context."""
    return "\n".join([
        "deployment notes:",
        f"AWS_ACCESS_KEY_ID={s['aws_access_key']}",
        f"aws_secret_access_key = {s['aws_secret_key']}",
        f"maps key: {s['google_api_key']}",
        f"GH_TOKEN={s['github_token']}",
        f"fine-grained {s['github_pat']}",
        f"slack bot {s['slack_token']}",
        f"alerts go to {s['slack_webhook']}",
        f"OPENAI_API_KEY={s['openai_key']}",
        f"Authorization: Bearer {s['jwt']}",
        f"DATABASE_URL=postgresql://app:{s['url_password']}@db.internal:5432/app",
        f"Server=tcp:sql.example.net,1433;Database=app;User ID=app;Password={s['connection_password']};",
        f'password = "{s["assigned_password"]}"',
        f"seed {s['high_entropy']}",
        s["private_key"].rstrip("\n"),
        "end of notes",
    ])


def fragments(s: dict[str, str]) -> list[str]:
    """The secret part of every value plus every 12-character window of it: none may appear anywhere.

    Public framing is left out: PEM armour lines, the webhook's host, the JWT's standard header.
    """
    pieces = [line.strip() for line in s["private_key"].splitlines() if "PRIVATE KEY" not in line]
    pieces.append(s["slack_webhook"].split("/services/", 1)[1])
    pieces.append(s["jwt"].split(".", 1)[1])
    pieces += [v for k, v in s.items() if k not in ("private_key", "slack_webhook", "jwt")]
    out = []
    for piece in pieces:
        out.append(piece)
        out += [piece[i:i + 12] for i in range(0, max(1, len(piece) - 11), 6)]
    return [f for f in out if len(f) >= 12]


def assert_no_secret(text: str, s: dict[str, str], where: str) -> None:
    leaked = [f for f in fragments(s) if f in text]
    kinds = sorted(k for k, v in s.items() if any(f in v for f in leaked))
    assert not leaked, f"{len(leaked)} secret fragment(s) of {kinds} in {where} (seed {SEED})"


# ------------------------------------------------------------------ inputs
#: Tracked files of this repository the checkout holds: real code and prose, plus the generated tool schemas
#: (a "do not edit" marker). A few files prove the scan; the whole repository only made the test slow.
CHECKOUT_FILES = ("README.md", "s3rm/cli.py", "gateway/app.py", "schema/tools")


def make_checkout(tmp: Path, s: dict[str, str]) -> Path:
    """A git checkout of :data:`CHECKOUT_FILES` (as committed at HEAD) with a planted config file and Python
    module, committed."""
    repo = tmp / "checkout"
    repo.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD", *CHECKOUT_FILES],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(repo)], input=archive, check=True)
    subprocess.run(["git", "-C", str(repo), "init", "--quiet"], check=True)
    (repo / "deploy").mkdir()
    (repo / "deploy" / "planted.env").write_text(planted_text(s) + "\n", encoding="utf-8")
    (repo / "s3rm" / "planted_settings.py").write_text(
        f'"""Settings."""\nAPI_TOKEN = "{s["github_token"]}"\nDSN = "mysql://root:{s["url_password"]}@localhost/x"\n',
        encoding="utf-8")
    (repo / "vendor").mkdir()
    (repo / "vendor" / "lib.py").write_text("x = 1\n", encoding="utf-8")
    (repo / "image.bin").write_bytes(b"\x89PNG\0\0" + os.urandom(64))
    (repo / "big.txt").write_text("a" * 1_100_000, encoding="utf-8")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", "commit",
                    "--quiet", "-m", "plant"], check=True)
    return repo


def make_docs(tmp: Path, s: dict[str, str]) -> Path:
    docs = tmp / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "setup.md").write_text(
        "# Setup\n\nIntro.\n\n## Database\n\n" + planted_text(s) + "\n\n```\n# not a heading\n```\n\n"
        "## Cache\n\nWarm the cache before traffic.\n", encoding="utf-8")
    (docs / "notes.rst").write_text(
        "=====\nNotes\n=====\n\nTop.\n\nSecrets\n-------\n\n" + f"token: {s['slack_token']}\n"
        f"jwt {s['jwt']}\n\nOther\n-----\n\nplain.\n", encoding="utf-8")
    (docs / "readme.txt").write_text(f"key {s['aws_access_key']} and {s['openai_key']}\n", encoding="utf-8")
    (docs / "page.html").write_text(
        "<html><head><style>p{}</style><script>var k=1;</script></head><body><h1>Runbook</h1>"
        f"<p>Connect with {s['url_password'] and 'postgres://u:' + s['url_password'] + '@h/db'}</p>"
        f"<h2>Keys</h2><p>{s['google_api_key']} &amp; {s['github_pat']}</p></body></html>\n", encoding="utf-8")
    (docs / "skip.py").write_text("print(1)\n", encoding="utf-8")
    return docs


def slack_export(tmp: Path, s: dict[str, str]) -> Path:
    """A Slack export in the documented layout: channels.json, users.json, one JSON file per channel per day."""
    root = tmp / "slack"
    (root / "general").mkdir(parents=True)
    (root / "ops").mkdir()
    (root / "channels.json").write_text(json.dumps([
        {"id": "C01GENERAL", "name": "general", "created": 1700000000, "members": ["U01", "U02"]},
        {"id": "C02OPS", "name": "ops", "created": 1700000000, "members": ["U01"]}]), encoding="utf-8")
    (root / "users.json").write_text(json.dumps([
        {"id": "U01", "name": "ana", "profile": {"display_name": "Ana", "real_name": "Ana K"}},
        {"id": "U02", "name": "bo", "profile": {"display_name": "", "real_name": "Bo L"}}]), encoding="utf-8")
    (root / "integration_logs.json").write_text("[]", encoding="utf-8")
    day1 = [
        {"type": "message", "subtype": "channel_join", "user": "U02", "text": "<@U02> has joined", "ts": "1764460000.000100"},
        {"type": "message", "user": "U01", "text": "Deploy failed: DNS cache stampede &amp; retries",
         "ts": "1764460100.000200", "thread_ts": "1764460100.000200", "reply_count": 2,
         "replies": [{"user": "U02", "ts": "1764460200.000300"}, {"user": "U01", "ts": "1764546700.000400"}]},
        {"type": "message", "user": "U02", "text": f"use the bot token {s['slack_token']} for <#C02OPS|ops>",
         "ts": "1764460200.000300", "thread_ts": "1764460100.000200", "parent_user_id": "U01"},
        {"type": "message", "user": "U01", "text": f"db is <postgres://x:{s['url_password']}@db|the db>",
         "ts": "1764460300.000500"},
    ]
    day2 = [
        {"type": "message", "user": "U01", "text": f"fixed, rotated {s['aws_access_key']} / {s['aws_secret_key']}",
         "ts": "1764546700.000400", "thread_ts": "1764460100.000200", "parent_user_id": "U01"},
        {"type": "message", "user": "U02", "text": "```" + planted_text(s) + "```", "ts": "1764546800.000600",
         "files": [{"name": "notes.txt"}]},
    ]
    (root / "general" / "2025-11-30.json").write_text(json.dumps(day1), encoding="utf-8")
    (root / "general" / "2025-12-01.json").write_text(json.dumps(day2), encoding="utf-8")
    (root / "ops" / "2025-11-30.json").write_text(json.dumps([
        {"type": "message", "user": "U01", "text": f"webhook {s['slack_webhook']} jwt {s['jwt']}",
         "ts": "1764460400.000700"}]), encoding="utf-8")
    return root


def run(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "s3rm", "collect-candidates", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ------------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("collect")
    s = make_secrets("inputs")
    return tmp, s, make_checkout(tmp, s), make_docs(tmp, s), slack_export(tmp, s)


def test_mask_text_masks_every_planted_kind_and_keeps_lines():
    s = make_secrets("mask_text")
    text = planted_text(s)
    result = mask_text(text, "notes.env")
    assert result.text.count("\n") == text.count("\n")
    assert_no_secret(result.text, s, "masked text")
    for kind in ("private_key", "aws_access_key", "google_api_key", "github_token", "slack_token", "openai_key",
                 "connection_string_password", "password_assignment"):
        assert result.counts[kind] >= 1, kind
    assert "end of notes" in result.text and "deployment notes:" in result.text


def test_full_run_on_repository_docs_and_slack_masks_everything_and_second_run_emits_only_changes(inputs):
    tmp, s, repo, docs, slack = inputs
    out, ck = tmp / "out1.jsonl", tmp / "state"
    args = ["--code-root", str(repo), "--docs-root", str(docs), "--slack-export", str(slack), "--checkpoint", str(ck)]
    first = run([*args, "--output", str(out), "--progress"])
    assert first.returncode == 0, first.stderr[-2000:]
    rows = read_jsonl(out)
    for blob, where in ((out.read_text(), "output"), (first.stdout, "stdout"), (first.stderr, "stderr"),
                        ((ck / "collect-candidates.checkpoint.json").read_text(), "checkpoint")):
        assert_no_secret(blob, s, where)
    # the checkpoint holds hashes only
    state = json.loads((ck / "collect-candidates.checkpoint.json").read_text())
    assert state["format"] == 1 and all(len(k) == 64 and len(v) == 64
                                        for space in state["sources"].values() for k, v in space.items())
    assert "planted" not in json.dumps(state) and "general" not in json.dumps(state)

    by_source = {src: [r for r in rows if r["source"] == src] for src in ("code", "docs", "slack")}
    # code: the repository's own tracked files, not vendored/binary/huge ones
    code_paths = {r["locator"]["path"] for r in by_source["code"]}
    assert {"s3rm/cli.py", "gateway/app.py", "README.md", "deploy/planted.env", "s3rm/planted_settings.py"} <= code_paths
    assert not code_paths & {"vendor/lib.py", "image.bin", "big.txt"}
    assert not any(p.startswith("schema/tools/") for p in code_paths)  # generated ("do not edit" marker)
    assert "code: " in first.stderr and "skipped: " in first.stderr and "binary 1" in first.stderr
    assert "huge 1" in first.stderr and "vendored 1" in first.stderr and "generated " in first.stderr
    planted = [r for r in by_source["code"] if r["locator"]["path"] == "deploy/planted.env"]
    assert planted and planted[0]["locator"]["lines"][0] == 1 and "end of notes" in planted[0]["body"]
    assert planted[0]["masked"].get("private_key") == 1
    for r in rows:
        assert len(r["body"]) <= MAX_BODY_CHARS and len(r["title"]) <= 200
        assert r["status"] == "new" and len(r["digest"]) == 64
        if r["source"] != "slack":
            first_line, last_line = r["locator"]["lines"]
            assert 1 <= first_line <= last_line and last_line - first_line < MAX_LINES
    # docs: sections with heading paths; fenced "# not a heading" is not a section; .py ignored
    sections = {(r["locator"]["path"], r["locator"]["section"]) for r in by_source["docs"]}
    assert ("guide/setup.md", "Setup > Database") in sections and ("guide/setup.md", "Setup > Cache") in sections
    assert ("notes.rst", "Notes > Secrets") in sections and ("page.html", "Runbook > Keys") in sections
    assert not any("not a heading" in sec for _, sec in sections)
    assert not any(p == "skip.py" for p, _ in sections)
    # slack: one candidate per thread (replies across day files joined), notices skipped
    threads = {r["locator"]["ts"]: r for r in by_source["slack"]}
    thread = threads["1764460100.000200"]
    assert thread["locator"]["thread_ts"] == "1764460100.000200" and thread["locator"]["messages"] == 3
    assert thread["locator"]["channel"] == "general" and "Ana:" in thread["body"] and "#ops" in thread["body"]
    assert "DNS cache stampede & retries" in thread["body"] and "has joined" not in thread["body"]
    assert threads["1764460300.000500"]["locator"]["thread_ts"] is None
    assert "slack: 3 day files read, 6 messages" in first.stderr
    assert "masked secrets: " in first.stderr

    # second run, nothing changed: nothing written
    out2 = tmp / "out2.jsonl"
    again = run([*args, "--output", str(out2)])
    assert again.returncode == 0 and read_jsonl(out2) == []
    assert f"unchanged {len(rows)}" in again.stderr

    # change one doc section, one code file, add a thread reply and a new doc
    setup = docs / "guide" / "setup.md"
    setup.write_text(setup.read_text().replace("Warm the cache before traffic.", "Warm the cache first."))
    (docs / "new.md").write_text("# New\n\nfresh page\n")
    (repo / "s3rm" / "planted_settings.py").write_text('"""Settings."""\nAPI_TOKEN = None\n')
    day2 = json.loads((slack / "general" / "2025-12-01.json").read_text())
    day2.append({"type": "message", "user": "U02", "text": "confirmed", "ts": "1764546900.000800",
                 "thread_ts": "1764460100.000200"})
    (slack / "general" / "2025-12-01.json").write_text(json.dumps(day2))
    out3 = tmp / "out3.jsonl"
    third = run([*args, "--output", str(out3)])
    assert third.returncode == 0, third.stderr[-2000:]
    changed = {(r["source"], r["locator"].get("path"), r["locator"].get("section") or r["locator"].get("ts"),
                r["status"]) for r in read_jsonl(out3)}
    assert changed == {
        ("docs", "guide/setup.md", "Setup > Cache", "changed"),
        ("docs", "new.md", "New", "new"),
        ("code", "s3rm/planted_settings.py", None, "changed"),
        ("slack", None, "1764460100.000200", "changed"),
    }
    assert_no_secret(out3.read_text() + third.stderr, s, "third run")


def test_zip_export_and_stdout_output(inputs, tmp_path):
    import shutil

    _, s, _, _, slack = inputs
    archive = shutil.make_archive(str(tmp_path / "export"), "zip", root_dir=slack)
    res = run(["--slack-export", archive, "--output", "-"])
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert {r["locator"]["channel"] for r in rows} == {"general", "ops"}
    assert_no_secret(res.stdout + res.stderr, s, "zip run")


def test_usage_errors_are_specific(tmp_path):
    assert "name at least one source" in run(["--output", str(tmp_path / "o.jsonl")]).stderr
    res = run(["--docs-root", str(tmp_path / "missing"), "--output", str(tmp_path / "o.jsonl")])
    assert res.returncode == 2 and "not a directory" in res.stderr
    (tmp_path / "notslack").mkdir()
    res = run(["--slack-export", str(tmp_path / "notslack"), "--output", str(tmp_path / "o.jsonl")])
    assert res.returncode == 2 and "no channels.json" in res.stderr and "Traceback" not in res.stderr
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "collect-candidates.checkpoint.json").write_text('{"format": 1, "sources": {"x": {"a": "b"}}}')
    res = run(["--docs-root", str(tmp_path), "--checkpoint", str(ck), "--output", str(tmp_path / "o.jsonl")])
    assert res.returncode == 2 and "not a collect-candidates checkpoint" in res.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_markdown_setext_and_rst_overline_sections():
    md = "Title\n=====\n\ntext\n\nSub\n---\n\nmore\n"
    assert [h for h, _ in sections_of(md, "markdown")] == [("Title",), ("Title", "Sub")]
    rst = "=====\nTop\n=====\n\nx\n\nPart\n----\n\ny\n"
    assert [h for h, _ in sections_of(rst, "rst")] == [("Top",), ("Top", "Part")]


def test_slack_markup_is_readable():
    assert readable_text("hi <@U1> in <#C1|dev>: <https://x.org|docs> &lt;ok&gt;", {"U1": "Ana"}, {}) == \
        "hi @Ana in #dev: docs <https://x.org> <ok>"


def test_assignments_mask_literals_but_leave_code_names_alone():
    code = mask_text('max_input_tokens = 16384\napi_key = environ.get("KEY")\npassword = "x9Lq2ZwPq"\n', "settings.py")
    assert "16384" in code.text and 'environ.get("KEY")' in code.text
    assert "x9Lq2ZwPq" not in code.text and code.counts["password_assignment"] == 1
    config = mask_text("DB_PASSWORD=x9Lq2ZwPq\nclientSecret: abcdefgh\ntimeout=30\n", "app.env")
    assert "x9Lq2ZwPq" not in config.text and "abcdefgh" not in config.text and "timeout=30" in config.text
