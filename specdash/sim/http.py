"""The simulated server's HTTP pieces shared by its routes: SGLang's JSON and error responses, the SSE end marker,
and the context-length refusal (``srt/entrypoints/http_server.py``, ``openai_api/serving_base.py``, 0.5.14)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

SSE_DONE = b"data: [DONE]\n\n"


def json_response(obj: Any, status: int = 200) -> Response:
    """Compact JSON (orjson), like SGLang's ``ORJSONResponse``."""
    return Response(orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY), status_code=status,
                    media_type="application/json")


def error_response(message: str, status: int = 400) -> Response:
    """SGLang's ``_create_error_response``: ``{"error": {"message": …}}``."""
    return json_response({"error": {"message": message}}, status)


class ContextLengthError(ValueError):
    """A request longer than the context (SGLang's message: :meth:`SimServer.context_error`)."""
