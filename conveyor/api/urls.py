from __future__ import annotations

from django.urls import path

from conveyor.api import tasks

urlpatterns = [
    path("tasks", tasks.EnqueueView.as_view(), name="tasks"),
    path("tasks/batch", tasks.EnqueueBatchView.as_view(), name="tasks-batch"),
    path("tasks/tx", tasks.EnqueueTxView.as_view(), name="tasks-tx"),
    path("tasks/<str:task_id>", tasks.TaskDetailView.as_view(), name="task"),
]
