"""Anthropic's Messages API (what Claude Code and the Anthropic SDKs speak): POST /v1/messages and
/v1/messages/count_tokens, over the same model router and engine path as the OpenAI API.

request.py and content.py turn a request into the engine's ChatMessage / SamplingParams / ReplyShape (a
field or block this server cannot honour is a 400 naming it); message.py writes the reply as Anthropic's
message object, events.py as its streamed events; errors.py writes errors in Anthropic's envelope;
routes.py wires the two routes.
"""
