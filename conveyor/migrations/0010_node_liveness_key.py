from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conveyor", "0009_bulk_jobs"),
    ]

    operations = [
        migrations.AddField(
            model_name="node",
            name="liveness_key",
            field=models.IntegerField(blank=True, null=True),
        ),
    ]
