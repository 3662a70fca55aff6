"""The dashboard: server-rendered pages under ``/ui`` (Jinja2 templates, SVG charts drawn on
the server, one stylesheet), served by the API process.

``routes``   the pages and the forms (login, acknowledge, resolve, silence)
``session``  the API key in an HTTP-only cookie, CSRF tokens, scopes
``views``    what each page shows, read from profiles, results and the alert store
``charts``   SVG geometry of sparklines, effect charts, histograms and ECDFs (pure)
"""
