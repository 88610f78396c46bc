#!/usr/bin/env bash
# One node project per peer (they want different openai majors). `npm ci` from the committed
# package-lock.json files reproduces the captured versions; without a lock, the first install below made them.
set -u
cd "$(dirname "$0")"
mkdir -p ../logs
OTEL="@opentelemetry/api @opentelemetry/sdk-trace-node @opentelemetry/sdk-trace-base @opentelemetry/resources @opentelemetry/exporter-trace-otlp-proto @opentelemetry/exporter-trace-otlp-grpc @opentelemetry/exporter-trace-otlp-http"
inst() { # dir, packages...
  local dir=$1; shift
  if [ -f $dir/package-lock.json ]; then
    (cd $dir && npm ci --no-audit --no-fund > ../../logs/npm-$dir.log 2>&1) && echo "$dir ok" || echo "$dir FAILED"
  else
    (cd $dir && npm install --no-audit --no-fund "$@" $OTEL > ../../logs/npm-$dir.log 2>&1) && echo "$dir ok" || echo "$dir FAILED"
  fi
}
inst vercel-ai ai@6 @ai-sdk/openai@3 zod
inst openinference @arizeai/openinference-instrumentation-openai@4.2 openai
inst openllmetry @traceloop/instrumentation-openai@0.27 openai
