import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
application = get_wsgi_application()

from dashboard.checks import secret_key_refuse  # noqa: E402  (needs the settings configured above)

secret_key_refuse()
