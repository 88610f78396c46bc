"""Provider and operation names as every convention spells them → one spelling each. Pure.

The request record stores the GenAI semantic conventions' well-known values
(``gen_ai.provider.name``: ``openai``, ``anthropic``, ``azure.ai.openai``,
``aws.bedrock``, ``gcp.vertex_ai`` …; ``gen_ai.operation.name``: ``chat``,
``text_completion``, ``embeddings`` …), whichever instrumentation sent the
span: the older ``gen_ai.system`` values (``az.ai.openai``, ``vertex_ai``),
OpenInference's ``llm.provider`` / ``llm.system`` (``azure``, ``mistralai``),
the Vercel AI SDK's ``<provider>.<api>`` ids (``openai.chat``,
``openai.responses``, ``amazon-bedrock``), OpenLLMetry's capitalised
``Anthropic``. A name this module does not know is kept, lowercased.
"""

from __future__ import annotations

# Whole names that are not "<provider>.<api>" and map to a well-known value.
_PROVIDERS = {
    "az.ai.openai": "azure.ai.openai", "azure.ai.openai": "azure.ai.openai", "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai", "azure-openai": "azure.ai.openai",
    "az.ai.inference": "azure.ai.inference", "azure.ai.inference": "azure.ai.inference",
    "aws.bedrock": "aws.bedrock", "aws": "aws.bedrock", "bedrock": "aws.bedrock", "amazon-bedrock": "aws.bedrock",
    "gcp.vertex_ai": "gcp.vertex_ai", "vertex_ai": "gcp.vertex_ai", "vertexai": "gcp.vertex_ai",
    "google.vertex": "gcp.vertex_ai", "google-vertex": "gcp.vertex_ai",
    "gcp.gemini": "gcp.gemini", "gemini": "gcp.gemini", "google.generative-ai": "gcp.gemini",
    "gcp.gen_ai": "gcp.gen_ai", "google": "gcp.gen_ai",
    "ibm.watsonx.ai": "ibm.watsonx.ai", "watsonx.ai": "ibm.watsonx.ai", "watsonx": "ibm.watsonx.ai",
    "mistral_ai": "mistral_ai", "mistralai": "mistral_ai", "mistral": "mistral_ai",
    "x_ai": "x_ai", "xai": "x_ai",
    "perplexity": "perplexity", "deepseek": "deepseek", "groq": "groq", "cohere": "cohere",
    "openai": "openai", "anthropic": "anthropic",
}
# Vercel AI SDK provider ids are "<provider>.<api>" (openai.chat, anthropic.messages,
# azure.responses, google.vertex.chat): the provider is what comes before the API.
_API_SUFFIXES = (".chat", ".responses", ".completion", ".completions", ".messages", ".embedding",
                 ".embeddings", ".image", ".transcription", ".speech", ".generative-ai")


def provider_name(value: object) -> str:
    """The well-known provider name for ``value`` as any convention spells it; '' for none."""
    if not isinstance(value, str):
        return ""
    name = value.strip().lower()
    if not name:
        return ""
    if name in _PROVIDERS:
        return _PROVIDERS[name]
    for suffix in _API_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            stem = name[:-len(suffix)]
            return _PROVIDERS.get(stem, _PROVIDERS.get(stem.partition(".")[0], stem.partition(".")[0]))
    return name


# Older and other spellings of gen_ai.operation.name values.
_OPERATIONS = {
    "chat": "chat", "completion": "text_completion", "text_completion": "text_completion",
    "embedding": "embeddings", "embeddings": "embeddings", "generate_content": "generate_content",
    "responses": "chat", "response": "chat",
}


def operation_name(value: object) -> str:
    """The GenAI operation name for ``value`` (``completion`` → ``text_completion``, …); '' for none."""
    if not isinstance(value, str):
        return ""
    name = value.strip().lower()
    return _OPERATIONS.get(name, name)


# Instrumentation scopes of provider SDKs that trace their own calls: when another
# instrumentation also traced the call, its span is the one a request keeps.
PROVIDER_SDK_SCOPES = frozenset({"com.anthropic.sdk.python"})


def is_provider_sdk_scope(scope_name: str) -> bool:
    return scope_name in PROVIDER_SDK_SCOPES
