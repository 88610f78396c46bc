"""The CLI's edges: every verb fails with one line (exit 2 for a bad argument, 1 otherwise),
stops quietly when its reader goes away, and names what the user gave."""

from __future__ import annotations

import http.server
import io
import json
import os
import subprocess
import sys
import threading

import pytest

from promptprism.collector.cli import main
from promptprism.collector.cli._progress import waiting
from support import free_port, wait_until

CLI = [sys.executable, "-c", "import sys; from promptprism.collector.cli import main; sys.exit(main())"]


def run_into_a_closed_pipe(*arguments: str) -> subprocess.CompletedProcess:
    """The CLI writing to a pipe whose reader has already gone (`| head` after its line)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([*CLI, *arguments], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)


def test_a_reader_that_goes_away_stops_the_command_quietly(tmp_path):
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "system", "content": "Be brief."}]}))
    for arguments in (("template", "show", "agent.system", "--demo"), ("preview", str(body), "--json")):
        completed = run_into_a_closed_pipe(*arguments)
        assert completed.stderr == "" and completed.returncode == 141, (arguments, completed.stderr)


def one_line(capsys) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error, error
    return error


@pytest.mark.parametrize("arguments, needle", [
    (["cache", "--requests", "abc"], "promptprism cache: argument --requests: invalid int value: 'abc'"),
    (["prompt", "list", "--limit", "abc"], "promptprism prompt list: argument --limit"),
    (["prompt", "show", "xyz"], "promptprism prompt show: argument id"),
    (["growth", "--by", "colour"], "promptprism growth: argument --by"),
    (["preview", "body.json", "--context-window", "0"], "promptprism preview: argument --context-window"),
])
def test_every_verb_reports_a_bad_argument_in_one_line(arguments, needle, capsys):
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2
    assert one_line(capsys).startswith(needle)


@pytest.mark.parametrize("url", ["notaurl", "ftp://example.com", "http://127.0.0.1:notaport"])
def test_a_url_that_is_not_one_is_a_bad_argument(url, capsys):
    assert main(["prompt", "list", "--url", url]) == 2
    assert "is not a collector URL" in one_line(capsys)


@pytest.fixture
def not_a_collector():
    """A web server that answers HTML, as a wrong --url would."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            status = 200 if self.path.startswith("/api/requests?") or self.path == "/api/requests" else 404
            body = b"<html><body><h1>Welcome to nginx!</h1></body></html>"
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *arguments):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize("arguments", [["prompt", "list"], ["prompt", "show", "abcd1234"], ["growth"]])
def test_a_url_that_is_not_a_collector_is_one_line_without_its_html(not_a_collector, arguments, capsys):
    assert main([*arguments, "--url", not_a_collector]) == 1
    error = one_line(capsys)
    assert "is it a promptprism collector?" in error and "<" not in error


def test_the_collector_names_the_flag_that_was_given(capsys):
    assert main(["collector", "--ui-address", "127.0.0.1:99999"]) == 2
    error = one_line(capsys)
    assert "--ui-address='127.0.0.1:99999'" in error and "PROMPTPRISM_UI_ADDRESS" not in error


def test_an_address_given_as_a_url_is_refused_in_one_line(capsys):
    assert main(["collector", "--ui-address", "http://127.0.0.1:4380"]) == 2
    error = one_line(capsys)
    assert "--ui-address='http://127.0.0.1:4380'" in error and "without a scheme" in error


def test_the_collector_names_the_variable_when_it_was_the_variable(monkeypatch, capsys):
    monkeypatch.setenv("PROMPTPRISM_UI_ADDRESS", "127.0.0.1:99999")
    assert main(["collector"]) == 2
    assert "PROMPTPRISM_UI_ADDRESS='127.0.0.1:99999'" in one_line(capsys)


def test_migrate_against_an_unreachable_server_prints_one_line(capsys):
    assert main(["migrate", "--store", f"http://127.0.0.1:{free_port()}/promptprism"]) == 1
    error = one_line(capsys)
    assert error.startswith("promptprism migrate: cannot migrate promptprism") and "Unexpected" not in error


@pytest.mark.parametrize("body, needle", [({"foo": 1}, "is not a request body of any dialect"),
                                          ([1, 2], "must hold a JSON object"), ("{", "is not valid JSON")])
def test_preview_refuses_what_is_not_a_request_body_and_names_the_file(tmp_path, body, needle, capsys):
    path = tmp_path / "body.json"
    path.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
    assert main(["preview", str(path)]) == 2
    error = one_line(capsys)
    assert needle in error and str(path) in error


def test_template_show_has_a_description_and_the_demo_templates(capsys):
    with pytest.raises(SystemExit):
        main(["template", "show", "--help"])
    assert "effective text" in capsys.readouterr().out
    assert main(["template", "show", "agent.system", "--demo", "--scope", "web-legacy", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["origin"] == "scope" and shown["text"] != shown["builtin_text"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_on_a_terminal_and_stays_quiet_when_piped():
    terminal, pipe = Terminal(), io.StringIO()
    with waiting("migrating promptprism", terminal, quiet_seconds=0):
        wait_until(lambda: "migrating promptprism" in terminal.getvalue(), timeout=30, message="no progress line")
    assert terminal.getvalue().endswith("\r\033[K")  # the line is cleared before the answer
    with waiting("migrating promptprism", pipe, quiet_seconds=0):
        pass
    assert pipe.getvalue() == ""
