"""Serves tests/django_project (DJANGO_SETTINGS_MODULE django_settings) with
Django's threaded WSGI server on 127.0.0.1, on a port the kernel picks, and
prints "listening on port N" once the socket listens. The argument names
the settings module (default django_settings)."""
import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    os.environ["DJANGO_SETTINGS_MODULE"] = sys.argv[1] if len(sys.argv) > 1 else "django_settings"
    import django
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, *args):  # one line per request would flood the log
            pass

    django.setup()
    server = ThreadedWSGIServer(("127.0.0.1", 0), QuietHandler)
    server.set_app(get_wsgi_application())
    print(f"listening on port {server.server_address[1]}", flush=True)
    server.serve_forever()
