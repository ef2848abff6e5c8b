"""WSGI entry point for gunicorn: ``gunicorn -c gateway/gunicorn.conf.py gateway.wsgi:app``.

Builds the app from the environment (``GatewayConfig.from_env``) when gunicorn
imports this module in its single worker process, with the MediaWiki Lesson
repository (:func:`gateway.wiki.repository.repository_factory`, built lazily
on the first tool call so a wiki that is down at start-up does not stop the
server; readiness reports it).
"""
from gateway.app import create_app
from gateway.wiki.repository import repository_factory

app = create_app(repository_factory=repository_factory)
