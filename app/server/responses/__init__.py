"""OpenAI's Responses API (`POST /v1/responses`, `GET`/`DELETE /v1/responses/{id}`) over the model router.

request.py and input_items.py turn a body into the engine's ChatMessage / SamplingParams / ReplyShape
(fields.py says what each field of OpenAI's does here); output.py writes the Response object and its
output items; events.py the streamed events; store.py keeps finished responses for
`previous_response_id`; routes.py wires them to the server.
"""
