"""Query-string filters of the alerts page and the triage form of a group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from dashboard.regressions.models import Alert, GroupKind, TriageStatus
from dashboard.regressions.selectors import AlertFilters
from dashboard.regressions.triage import TriageChange

SORTS = (("date", "newest range first"), ("size", "largest change first"))
FOLLOW_GROUP = "group"


@dataclass(frozen=True)
class UnknownFilter:
    """A filter value the alerts page cannot use as asked: its control shows it marked, the page says why."""

    name: str
    value: str
    message: str


class AlertFilterForm(forms.Form):
    suite = forms.CharField(required=False, max_length=100)
    hardware = forms.CharField(required=False, max_length=50)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *TriageStatus.choices])
    kind = forms.ChoiceField(required=False, choices=[("", "any kind"), *GroupKind.choices])
    sort = forms.ChoiceField(required=False, choices=SORTS)

    def filters(self) -> AlertFilters:
        """The valid filters; an invalid value is dropped (the page says so) rather than failing."""
        self.is_valid()  # cleaned_data then holds the fields that are valid, and only those
        data = self.cleaned_data
        sort = data.get("sort") or "date"
        return AlertFilters(
            suite=data.get("suite") or "",
            hardware_class=data.get("hardware") or "",
            status=data.get("status") or "",
            kind=data.get("kind") or "",
            sort="size" if sort == "size" else "date",
        )

    def unknown(self, *, suites: list[str], hardware_classes: list[str]) -> list[UnknownFilter]:
        """Values asked for that name nothing: a suite or hardware class without alerts (applied, so the
        list is empty), a status, kind or sort that does not exist (ignored)."""
        filters = self.filters()
        found = []
        for name, value, known in (
            ("suite", filters.suite, suites),
            ("hardware", filters.hardware_class, hardware_classes),
        ):
            if value and value not in known:
                message = (
                    f"No alert group has a {name} named {value!r} (there are: {', '.join(known) or 'none'})"
                )
                found.append(UnknownFilter(name=name, value=value, message=message))
        choices = {"status": TriageStatus.choices, "kind": GroupKind.choices, "sort": SORTS}
        for name, known_choices in choices.items():
            if name in self.errors:
                value = str(self.data.get(name, ""))
                labels = ", ".join(str(choice) for choice, _ in known_choices)
                message = f"{value!r} is not a {name} (one of: {labels}): this filter is ignored"
                found.append(UnknownFilter(name=name, value=value, message=message))
        return found


class GroupTriageForm(forms.Form):
    status = forms.ChoiceField(choices=TriageStatus.choices)
    assignee = forms.ModelChoiceField(queryset=get_user_model().objects.none(), required=False)
    alerts = forms.ModelMultipleChoiceField(
        queryset=Alert.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The alerts the alert status applies to; none ticked means every alert of the group. "
        "An alert given its own status keeps it when the group's status changes.",
    )
    alert_status = forms.ChoiceField(
        required=False,
        choices=[
            ("", "leave as they are"),
            (FOLLOW_GROUP, "follow the group's status"),
            *TriageStatus.choices,
        ],
    )

    def __init__(self, *args: Any, group_id: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group_id = group_id
        assignee_field = self.fields["assignee"]
        alerts_field = self.fields["alerts"]
        assert isinstance(assignee_field, forms.ModelChoiceField)
        assert isinstance(alerts_field, forms.ModelMultipleChoiceField)
        assignee_field.queryset = (
            get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username")
        )
        alerts_field.queryset = Alert.objects.filter(group_id=group_id)

    def change(self) -> TriageChange:
        data = self.cleaned_data
        assignee = data.get("assignee")
        alert_status = data.get("alert_status") or None
        alert_ids = [alert.pk for alert in data.get("alerts") or ()]
        return TriageChange(
            status=data["status"],
            assignee_id=assignee.pk if assignee else None,
            assignee_set=True,
            alert_ids=alert_ids,
            alert_status=None if alert_status == FOLLOW_GROUP else alert_status,
            alerts_follow=alert_status == FOLLOW_GROUP,
        )


class CommentForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=10_000, strip=True)
