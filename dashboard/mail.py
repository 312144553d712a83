"""E-mail turned off by the operator (EMAIL_URL= empty): a mail backend that sends nothing and says so.

Unlike Django's dummy backend (a development tool, which `check --deploy` rightly refuses), this one is a
deliberate production state: alert e-mails are off (settings empty PERFWATCH_ALERT_EMAILS with it), and
anything else that tries to send a message is logged instead of silently lost.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.message import EmailMessage

logger = logging.getLogger(__name__)


class EmailOffBackend(BaseEmailBackend):
    def send_messages(self, email_messages: Sequence[EmailMessage], *args: Any, **kwargs: Any) -> int:
        for message in email_messages:
            logger.warning("e-mail is off (EMAIL_URL is empty): not sent: %s", message.subject)
        return 0
