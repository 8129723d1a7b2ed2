"""The composition root: settings, URL confs and the ASGI/WSGI entry points.

The one package above every app. It names them all (the installed apps, each app's URLs and
API viewsets), so that no app has to name one above it: `levers9`, the ground floor, stays
ignorant of the product built on it.
"""
