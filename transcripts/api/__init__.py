"""The push API: a token-authenticated JSON API with an OpenAPI schema at /api/schema.

A token belongs to one workspace; every request with it sees that
workspace only, and acts in the name of the user who created the token.
`permissions` is the one place that decides what a token may do;
`errors` gives every failure one JSON shape: {"error": {"code", "message"}}.
"""
