from conveyor.broker import TaskSpec


def test_enqueue_then_lease_then_ack_completes(broker):
    task = broker.enqueue(TaskSpec(type="email:send", payload=b"{}"))
    batch = broker.lease("default", 10)
    assert [t.id for t in batch.tasks] == [task.id]
    assert broker.ack_many([(batch.tasks[0], None)]) == []
    assert broker.get_task(task.id).state == "completed"
