# syntax=docker/dockerfile:1
# Small, non-root image running `cellfit serve`.
# The full image has the C compiler for the C extensions (scheduler.kube._names, the node-name
# fast path; scheduler.matching's _transport, _positions and _solve, AlloX's plans); the runtime
# stage below is the slim image of the same Debian release, so the same glibc.
FROM python:3.11-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
COPY estimator ./estimator
COPY placer ./placer
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="cellfit" \
      org.opencontainers.image.description="Kubernetes scheduler extender for deep-learning GPU clusters"
COPY --from=build /wheels /wheels
# The extensions are optional when installing from source (without them the same decisions, in
# Python and NumPy, slower); in the image they must be there.
RUN pip install --no-cache-dir --no-compile /wheels/*.whl && rm -rf /wheels \
    && python -c "import importlib; modules = ('scheduler.kube.names', 'scheduler.matching.transport', \
'scheduler.matching.positions', 'scheduler.matching.solve'); \
missing = [m for m in modules if not importlib.import_module(m).NATIVE]; \
assert not missing, f'C extensions not built for: {missing}'"
# 65532: the conventional "nonroot" UID; no shell login, no home writes needed.
USER 65532:65532
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
EXPOSE 8888
HEALTHCHECK NONE
ENTRYPOINT ["cellfit", "serve"]
CMD ["--host", "0.0.0.0", "--port", "8888"]
