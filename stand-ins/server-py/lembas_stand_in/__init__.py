"""A small LLeMbas web server written from the link spec on the official ACP Python SDK.

It serves discovery, the HTTP API a CLI uses, and the device link, where the SDK's client side
(``acp.ClientSideConnection``) speaks to each device; a test API does what a person in its web
UI would (open a chat, write in it, stop a turn, delete a chat, answer cards). The suite runs
its whole device catalogue against it in CI: a conforming server built the ordinary way must
pass or be not applicable, never fail.
"""
