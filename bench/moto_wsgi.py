"""moto's S3 API as a WSGI application, for bench/jobs.py to serve with keep-alive connections.

moto's own server (werkzeug's development server) closes the connection
after every answer; a real S3 endpoint keeps it open. gunicorn's threaded
worker keeps it open as S3 does, in one process, so the buckets moto
holds in memory are the same for every connection.
"""

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

app = DomainDispatcherApplication(create_backend_app)
