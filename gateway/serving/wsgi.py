"""WSGI entry point for gunicorn: ``gunicorn -c gateway/serving/gunicorn.conf.py gateway.serving.wsgi:app``.

When gunicorn imports this module in its single worker process, it reads the
configuration once (:func:`gateway.config.load_config` over ``os.environ``;
an invalid value raises :class:`~gateway.config.ConfigError` naming the
variable) and builds the app with the MediaWiki Lesson repository
(:func:`gateway.wiki.repository.repository_factory`, built lazily on the first
tool call so a wiki that is down at start-up does not stop the server;
readiness reports it).
"""
import os

from gateway.app import create_app
from gateway.config import load_config
from gateway.wiki.repository import repository_factory

app = create_app(load_config(os.environ), repository_factory=repository_factory)
