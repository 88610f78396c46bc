#!/usr/bin/env bash
# Creates one venv per peer (they pin conflicting openai/anthropic versions). Re-runnable.
set -u
cd "$(dirname "$0")"
mkdir -p venvs logs
# the client versions the captures were made with (see venvs/*.freeze.txt)
OPENAI=openai==3.57.0; ANTHROPIC=anthropic==2.15.0
PY=${PY:-python3.11}
OTEL="opentelemetry-sdk opentelemetry-exporter-otlp-proto-http opentelemetry-exporter-otlp-proto-grpc"
mk() { # name, packages...
  local name=$1; shift
  [ -x venvs/$name/bin/python ] || $PY -m venv venvs/$name
  venvs/$name/bin/pip install -q "$@" > logs/pip-$name.log 2>&1 && echo "$name ok" || echo "$name FAILED (logs/pip-$name.log)"
  venvs/$name/bin/pip freeze > venvs/$name.freeze.txt 2>/dev/null
}
mk openinference openinference-instrumentation-openai==0.1.66 openinference-instrumentation-anthropic==3.1.0 $OPENAI $ANTHROPIC $OTEL &
mk openllmetry opentelemetry-instrumentation-openai==0.62.4 opentelemetry-instrumentation-anthropic==0.62.4 $OPENAI $ANTHROPIC $OTEL &
wait
# openlit 1.45 pins openai<3, anthropic<1 and a dozen contrib instrumentations; pip's backtracking
# gives up unless the contrib set is pinned to one release that has all of them (0.66b2 lacks some).
OLC=""; for p in aiohttp-client asgi django falcon fastapi flask httpx pyramid requests starlette tornado urllib urllib3; do OLC="$OLC opentelemetry-instrumentation-$p==0.66b1"; done
mk openlit openlit==1.45.0 openai==2.54.0 anthropic==0.125.0 $OLC &
mk anthropic-sdk $ANTHROPIC $OTEL &
wait
# the project's own reference peer, outside /work/main (NOTES: 2.4b0 imports only with util-genai 0.4b0, needs httpx)
mk openai-v2 opentelemetry-instrumentation-openai-v2==2.4b0 opentelemetry-util-genai==0.4b0 $OPENAI httpx $OTEL opentelemetry-instrumentation-urllib &
# an HTTP client span around the LLM calls (openai 3.x / anthropic 2.x use httpx2, which nothing instruments)
for v in openinference openllmetry anthropic-sdk; do venvs/$v/bin/pip install -q opentelemetry-instrumentation-urllib >> logs/pip-$v.log 2>&1 && echo "$v +urllib ok"; done
# traceloop-sdk 0.62.4 (workflow/task spans around OpenLLMetry's LLM spans); contrib pinned as for openlit
TLC=""; for p in logging redis requests sqlalchemy threading urllib3; do TLC="$TLC opentelemetry-instrumentation-$p==0.66b1"; done
mk openllmetry-sdk traceloop-sdk==0.62.4 $OPENAI $ANTHROPIC httpx opentelemetry-instrumentation==0.66b1 $TLC opentelemetry-instrumentation-urllib==0.66b1 &
wait
