"""WSGI entry point for gunicorn: ``gunicorn -c gateway/gunicorn.conf.py gateway.wsgi:app``.

Builds the app from the environment (``GatewayConfig.from_env``) when gunicorn
imports this module in its single worker process.
"""
from gateway.app import create_app

app = create_app()
