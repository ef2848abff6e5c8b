"""Serving entry points: the gunicorn settings file (``gunicorn.conf.py``), the gthread
worker with JSON error pages (:mod:`gateway.serving.worker`) and the WSGI module
(:mod:`gateway.serving.wsgi`). The top layer: these build the configuration from the
process environment and hand it to ``create_app``; nothing imports them."""
