"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "fabric_credential",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("username", sa.String(length=256), nullable=False),
        sa.Column("password", sa.Text(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_fabric_credential")),
    )
    op.create_table(
        "infrastructure_provider",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org", sa.String(length=256), nullable=False),
        sa.Column("org_display_name", sa.String(length=256), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_infrastructure_provider")),
        sa.UniqueConstraint("org", name=op.f("uq_infrastructure_provider_org")),
    )
    op.create_table(
        "nvlink_nmxc_endpoint",
        sa.Column("chassis_serial", sa.String(length=256), nullable=False),
        sa.Column("endpoint", sa.Text(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("length(chassis_serial) > 0", name=op.f("ck_nvlink_nmxc_endpoint_chassis_serial")),
        sa.CheckConstraint("length(endpoint) > 0", name=op.f("ck_nvlink_nmxc_endpoint_endpoint")),
        sa.PrimaryKeyConstraint("chassis_serial", name=op.f("pk_nvlink_nmxc_endpoint")),
    )
    op.create_table(
        "tenant",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org", sa.String(length=256), nullable=False),
        sa.Column("org_display_name", sa.String(length=256), nullable=True),
        sa.Column("targeted_instance_creation", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenant")),
        sa.UniqueConstraint("org", name=op.f("uq_tenant_org")),
    )
    op.create_table(
        "site",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("infrastructure_provider_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("serial_console_hostname", sa.String(length=256), nullable=True),
        sa.Column("is_serial_console_enabled", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("serial_console_idle_timeout", sa.Integer(), nullable=True),
        sa.Column("serial_console_max_session_length", sa.Integer(), nullable=True),
        sa.Column("location", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("contact", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("native_networking", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("network_security_group", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("nvlink_partition", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("flow", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("image_based_operating_system", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("site_controller_version", sa.String(length=64), nullable=True),
        sa.Column("site_agent_version", sa.String(length=64), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("status IN ('Pending', 'Registered', 'Error')", name=op.f("ck_site_status")),
        sa.ForeignKeyConstraint(
            ["infrastructure_provider_id"],
            ["infrastructure_provider.id"],
            name=op.f("fk_site_infrastructure_provider_id_infrastructure_provider"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_site")),
        sa.UniqueConstraint(
            "infrastructure_provider_id", "name", name=op.f("uq_site_infrastructure_provider_id_name")
        ),
    )
    op.create_table(
        "allocation",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("infrastructure_provider_id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status IN ('Pending', 'Registered', 'Deleting', 'Error')", name=op.f("ck_allocation_status")
        ),
        sa.ForeignKeyConstraint(
            ["infrastructure_provider_id"],
            ["infrastructure_provider.id"],
            name=op.f("fk_allocation_infrastructure_provider_id_infrastructure_provider"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_allocation_site_id_site"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenant.id"], name=op.f("fk_allocation_tenant_id_tenant"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_allocation")),
        sa.UniqueConstraint(
            "tenant_id", "site_id", "name", name=op.f("uq_allocation_tenant_id_site_id_name")
        ),
    )
    op.create_index(
        op.f("ix_allocation_infrastructure_provider_id"),
        "allocation",
        ["infrastructure_provider_id"],
        unique=False,
    )
    op.create_index(op.f("ix_allocation_site_id"), "allocation", ["site_id"], unique=False)
    op.create_table(
        "instance_type",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("infrastructure_provider_id", sa.Uuid(), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("controller_machine_type", sa.String(length=256), nullable=True),
        sa.Column(
            "labels",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status IN ('Pending', 'Registering', 'Ready', 'Deleting', 'Error')",
            name=op.f("ck_instance_type_status"),
        ),
        sa.ForeignKeyConstraint(
            ["infrastructure_provider_id"],
            ["infrastructure_provider.id"],
            name=op.f("fk_instance_type_infrastructure_provider_id_infrastructure_provider"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_instance_type_site_id_site"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_type")),
        sa.UniqueConstraint("site_id", "name", name=op.f("uq_instance_type_site_id_name")),
    )
    op.create_index(
        op.f("ix_instance_type_infrastructure_provider_id"),
        "instance_type",
        ["infrastructure_provider_id"],
        unique=False,
    )
    op.create_table(
        "logical_partition",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created_by", sa.String(length=256), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status IN ('Pending', 'Provisioning', 'Configuring', 'Ready', 'Deleting', 'Error')",
            name=op.f("ck_logical_partition_status"),
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_logical_partition_site_id_site"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenant.id"],
            name=op.f("fk_logical_partition_tenant_id_tenant"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_logical_partition")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_logical_partition_tenant_id_name")),
    )
    op.create_index(op.f("ix_logical_partition_site_id"), "logical_partition", ["site_id"], unique=False)
    op.create_table(
        "nvlink_domain",
        sa.Column("uuid", sa.Uuid(), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("last_pass_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_nvlink_domain_site_id_site"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("uuid", name=op.f("pk_nvlink_domain")),
    )
    op.create_index(op.f("ix_nvlink_domain_site_id"), "nvlink_domain", ["site_id"], unique=False)
    op.create_table(
        "tenant_site",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_tenant_site_site_id_site"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenant.id"], name=op.f("fk_tenant_site_tenant_id_tenant"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("tenant_id", "site_id", name=op.f("pk_tenant_site")),
    )
    op.create_index(op.f("ix_tenant_site_site_id"), "tenant_site", ["site_id"], unique=False)
    op.create_table(
        "allocation_constraint",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("allocation_id", sa.Uuid(), nullable=False),
        sa.Column("resource_type", sa.String(length=32), nullable=False),
        sa.Column("resource_type_id", sa.Uuid(), nullable=False),
        sa.Column("instance_type_id", sa.Uuid(), nullable=True),
        sa.Column("constraint_type", sa.String(length=32), nullable=False),
        sa.Column("constraint_value", sa.Integer(), nullable=False),
        sa.Column("derived_resource_id", sa.Uuid(), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "(resource_type = 'InstanceType') = (instance_type_id IS NOT NULL AND instance_type_id = resource_type_id)",
            name=op.f("ck_allocation_constraint_instance_type_mirror"),
        ),
        sa.CheckConstraint(
            "constraint_type IN ('Reserved', 'OnDemand', 'Preemptible')",
            name=op.f("ck_allocation_constraint_constraint_type"),
        ),
        sa.CheckConstraint(
            "resource_type IN ('InstanceType', 'IPBlock')",
            name=op.f("ck_allocation_constraint_resource_type"),
        ),
        sa.CheckConstraint("constraint_value > 0", name=op.f("ck_allocation_constraint_constraint_value")),
        sa.ForeignKeyConstraint(
            ["allocation_id"],
            ["allocation.id"],
            name=op.f("fk_allocation_constraint_allocation_id_allocation"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["instance_type_id"],
            ["instance_type.id"],
            name=op.f("fk_allocation_constraint_instance_type_id_instance_type"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_allocation_constraint")),
        sa.UniqueConstraint("allocation_id", name=op.f("uq_allocation_constraint_allocation_id")),
    )
    op.create_index(
        op.f("ix_allocation_constraint_instance_type_id"),
        "allocation_constraint",
        ["instance_type_id"],
        unique=False,
    )
    op.create_table(
        "fabric_intent",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("domain_uuid", sa.Uuid(), nullable=False),
        sa.Column("logical_partition_id", sa.Uuid(), nullable=True),
        sa.Column("operation", sa.String(length=32), nullable=False),
        sa.Column("partition_name", sa.String(length=256), nullable=False),
        sa.Column("fabric_ref", sa.String(length=64), nullable=True),
        sa.Column("gpu_uids", postgresql.ARRAY(sa.Numeric(precision=20, scale=0)), nullable=False),
        sa.Column("operation_id", sa.String(length=64), nullable=True),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "operation IN ('create', 'update', 'remove', 'remove_default_partition')",
            name=op.f("ck_fabric_intent_operation"),
        ),
        sa.CheckConstraint(
            "state IN ('pending', 'completed', 'failed', 'timedout', 'adopted', 'abandoned')",
            name=op.f("ck_fabric_intent_state"),
        ),
        sa.ForeignKeyConstraint(
            ["domain_uuid"],
            ["nvlink_domain.uuid"],
            name=op.f("fk_fabric_intent_domain_uuid_nvlink_domain"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["logical_partition_id"],
            ["logical_partition.id"],
            name=op.f("fk_fabric_intent_logical_partition_id_logical_partition"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fabric_intent")),
    )
    op.create_index(
        op.f("ix_fabric_intent_logical_partition_id"), "fabric_intent", ["logical_partition_id"], unique=False
    )
    op.create_index("ix_fabric_intent_open", "fabric_intent", ["domain_uuid", "state"], unique=False)
    op.create_table(
        "physical_partition",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("logical_partition_id", sa.Uuid(), nullable=False),
        sa.Column("domain_uuid", sa.Uuid(), nullable=False),
        sa.Column("fabric_partition_id", sa.BigInteger(), nullable=False),
        sa.Column("fabric_ref", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "fabric_partition_id BETWEEN 0 AND 4294967295",
            name=op.f("ck_physical_partition_fabric_partition_id_u32"),
        ),
        sa.ForeignKeyConstraint(
            ["domain_uuid"],
            ["nvlink_domain.uuid"],
            name=op.f("fk_physical_partition_domain_uuid_nvlink_domain"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["logical_partition_id"],
            ["logical_partition.id"],
            name=op.f("fk_physical_partition_logical_partition_id_logical_partition"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_physical_partition")),
        sa.UniqueConstraint(
            "domain_uuid",
            "fabric_partition_id",
            name=op.f("uq_physical_partition_domain_uuid_fabric_partition_id"),
        ),
        sa.UniqueConstraint("domain_uuid", "name", name=op.f("uq_physical_partition_domain_uuid_name")),
        sa.UniqueConstraint(
            "logical_partition_id",
            "domain_uuid",
            name=op.f("uq_physical_partition_logical_partition_id_domain_uuid"),
        ),
    )
    op.create_table(
        "vpc",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("network_virtualization_type", sa.String(length=32), nullable=False),
        sa.Column("labels", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("nvlink_logical_partition_id", sa.Uuid(), nullable=True),
        sa.Column("routing_profile", sa.String(length=64), nullable=True),
        sa.Column("requested_vni", sa.Integer(), nullable=True),
        sa.Column("vni", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "network_virtualization_type IN ('ETHERNET_VIRTUALIZER', 'FNN')", name=op.f("ck_vpc_nvt")
        ),
        sa.CheckConstraint(
            "status IN ('Pending', 'Provisioning', 'Configuring', 'Ready', 'Error', 'Deleting')",
            name=op.f("ck_vpc_status"),
        ),
        sa.CheckConstraint("vni IS NULL OR vni BETWEEN 0 AND 16777215", name=op.f("ck_vpc_vni")),
        sa.ForeignKeyConstraint(
            ["nvlink_logical_partition_id"],
            ["logical_partition.id"],
            name=op.f("fk_vpc_nvlink_logical_partition_id_logical_partition"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_vpc_site_id_site"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenant.id"], name=op.f("fk_vpc_tenant_id_tenant"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_vpc")),
        sa.UniqueConstraint("tenant_id", "site_id", "name", name=op.f("uq_vpc_tenant_id_site_id_name")),
    )
    op.create_index(
        op.f("ix_vpc_nvlink_logical_partition_id"), "vpc", ["nvlink_logical_partition_id"], unique=False
    )
    op.create_index(op.f("ix_vpc_site_id"), "vpc", ["site_id"], unique=False)
    op.create_table(
        "instance",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("instance_type_id", sa.Uuid(), nullable=True),
        sa.Column("vpc_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("operating_system_id", sa.Uuid(), nullable=True),
        sa.Column("ipxe_script", sa.Text(), nullable=True),
        sa.Column("user_data", sa.Text(), nullable=True),
        sa.Column("always_boot_with_custom_ipxe", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("phone_home_enabled", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("labels", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("nvlink_config_version", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column(
            "nvlink_config_changed_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("nvlink_applied_version", sa.BigInteger(), nullable=True),
        sa.Column("created_by", sa.String(length=256), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status IN ('Pending', 'Provisioning', 'Configuring', 'Ready', 'Updating', 'Repairing', 'Rebooting', 'Terminating', 'Error')",
            name=op.f("ck_instance_status"),
        ),
        sa.CheckConstraint("nvlink_config_version >= 1", name=op.f("ck_instance_nvlink_config_version")),
        sa.ForeignKeyConstraint(
            ["instance_type_id"],
            ["instance_type.id"],
            name=op.f("fk_instance_instance_type_id_instance_type"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_instance_site_id_site"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenant.id"], name=op.f("fk_instance_tenant_id_tenant"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["vpc_id"], ["vpc.id"], name=op.f("fk_instance_vpc_id_vpc"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance")),
        sa.UniqueConstraint("tenant_id", "site_id", "name", name=op.f("uq_instance_tenant_id_site_id_name")),
    )
    op.create_index(op.f("ix_instance_instance_type_id"), "instance", ["instance_type_id"], unique=False)
    op.create_index(op.f("ix_instance_site_id"), "instance", ["site_id"], unique=False)
    op.create_index(op.f("ix_instance_vpc_id"), "instance", ["vpc_id"], unique=False)
    op.create_table(
        "subnet",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("vpc_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("ipv4_prefix", sa.String(length=64), nullable=True),
        sa.Column("ipv4_block_id", sa.Uuid(), nullable=True),
        sa.Column("ipv4_gateway", sa.String(length=64), nullable=True),
        sa.Column("prefix_length", sa.Integer(), nullable=True),
        sa.Column("routing_type", sa.String(length=32), nullable=True),
        sa.Column("mtu", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status IN ('Pending', 'Provisioning', 'Ready', 'Deleting', 'Deleted', 'Error')",
            name=op.f("ck_subnet_status"),
        ),
        sa.CheckConstraint(
            "prefix_length IS NULL OR prefix_length BETWEEN 8 AND 30", name=op.f("ck_subnet_prefix_length")
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_subnet_site_id_site"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenant.id"], name=op.f("fk_subnet_tenant_id_tenant"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["vpc_id"], ["vpc.id"], name=op.f("fk_subnet_vpc_id_vpc"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subnet")),
        sa.UniqueConstraint("tenant_id", "site_id", "name", name=op.f("uq_subnet_tenant_id_site_id_name")),
    )
    op.create_index(op.f("ix_subnet_vpc_id"), "subnet", ["vpc_id"], unique=False)
    op.create_table(
        "instance_interface",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("instance_id", sa.Uuid(), nullable=False),
        sa.Column("subnet_id", sa.Uuid(), nullable=False),
        sa.Column("is_physical", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status IN ('Pending', 'Provisioning', 'Ready', 'Deleting', 'Error')",
            name=op.f("ck_instance_interface_status"),
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["instance.id"],
            name=op.f("fk_instance_interface_instance_id_instance"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["subnet_id"],
            ["subnet.id"],
            name=op.f("fk_instance_interface_subnet_id_subnet"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_interface")),
    )
    op.create_index(
        op.f("ix_instance_interface_instance_id"), "instance_interface", ["instance_id"], unique=False
    )
    op.create_index(
        op.f("ix_instance_interface_subnet_id"), "instance_interface", ["subnet_id"], unique=False
    )
    op.create_table(
        "machine",
        sa.Column("id", sa.String(length=256), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("instance_type_id", sa.Uuid(), nullable=True),
        sa.Column("instance_id", sa.Uuid(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("controller_machine_type", sa.String(length=256), nullable=True),
        sa.Column("hw_sku_device_type", sa.String(length=64), nullable=True),
        sa.Column("vendor", sa.String(length=256), nullable=True),
        sa.Column("product_name", sa.String(length=256), nullable=True),
        sa.Column("hostname", sa.String(length=256), nullable=True),
        sa.Column("serial_number", sa.String(length=256), nullable=True),
        sa.Column("maintenance_message", sa.String(length=256), nullable=True),
        sa.Column("labels", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("is_missing_on_site", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("nvlink_domain_uuid", sa.Uuid(), nullable=True),
        sa.Column("chassis_serial", sa.String(length=256), nullable=True),
        sa.Column("tray_index", sa.Integer(), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status IN ('Initializing', 'Ready', 'Reset', 'Maintenance', 'InUse', 'Error', 'Decommissioned', 'Unknown')",
            name=op.f("ck_machine_status"),
        ),
        sa.CheckConstraint(
            "(nvlink_domain_uuid IS NULL) = (chassis_serial IS NULL)",
            name=op.f("ck_machine_nvlink_info_whole"),
        ),
        sa.CheckConstraint("length(id) BETWEEN 1 AND 256", name=op.f("ck_machine_id_length")),
        sa.CheckConstraint("tray_index IS NULL OR tray_index >= 0", name=op.f("ck_machine_tray_index")),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["instance.id"],
            name=op.f("fk_machine_instance_id_instance"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["instance_type_id"],
            ["instance_type.id"],
            name=op.f("fk_machine_instance_type_id_instance_type"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["nvlink_domain_uuid"],
            ["nvlink_domain.uuid"],
            name=op.f("fk_machine_nvlink_domain_uuid_nvlink_domain"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_machine_site_id_site"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_machine")),
        sa.UniqueConstraint(
            "chassis_serial", "tray_index", name=op.f("uq_machine_chassis_serial_tray_index")
        ),
        sa.UniqueConstraint("instance_id", name=op.f("uq_machine_instance_id")),
    )
    op.create_index(op.f("ix_machine_instance_type_id"), "machine", ["instance_type_id"], unique=False)
    op.create_index(op.f("ix_machine_nvlink_domain_uuid"), "machine", ["nvlink_domain_uuid"], unique=False)
    op.create_index(
        "ix_machine_placement", "machine", ["site_id", "instance_type_id", "nvlink_domain_uuid"], unique=False
    )
    op.create_table(
        "nvlink_interface",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("instance_id", sa.Uuid(), nullable=False),
        sa.Column("logical_partition_id", sa.Uuid(), nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("device_instance", sa.Integer(), nullable=False),
        sa.Column("device", sa.String(length=256), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("nvlink_domain_uuid", sa.Uuid(), nullable=True),
        sa.Column("gpu_guid", sa.Numeric(precision=20, scale=0), nullable=True),
        sa.Column("created_by", sa.String(length=256), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status IN ('Pending', 'Provisioning', 'Ready', 'Deleting', 'Error')",
            name=op.f("ck_nvlink_interface_status"),
        ),
        sa.CheckConstraint("device_instance >= 0", name=op.f("ck_nvlink_interface_device_instance")),
        sa.CheckConstraint(
            "gpu_guid IS NULL OR (gpu_guid >= 0 AND gpu_guid <= 18446744073709551615)",
            name=op.f("ck_nvlink_interface_gpu_guid_u64"),
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["instance.id"],
            name=op.f("fk_nvlink_interface_instance_id_instance"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["logical_partition_id"],
            ["logical_partition.id"],
            name=op.f("fk_nvlink_interface_logical_partition_id_logical_partition"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_nvlink_interface_site_id_site"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nvlink_interface")),
    )
    op.create_index(
        op.f("ix_nvlink_interface_instance_id"), "nvlink_interface", ["instance_id"], unique=False
    )
    op.create_index(
        op.f("ix_nvlink_interface_logical_partition_id"),
        "nvlink_interface",
        ["logical_partition_id"],
        unique=False,
    )
    op.create_index(
        "uq_nvlink_interface_live_gpu",
        "nvlink_interface",
        ["instance_id", "device_instance"],
        unique=True,
        postgresql_where=sa.text("status <> 'Deleting'"),
    )
    op.create_table(
        "gpu",
        sa.Column("machine_id", sa.String(length=256), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("gpu_uid", sa.Numeric(precision=20, scale=0), nullable=False),
        sa.Column("slot_id", sa.Integer(), nullable=True),
        sa.Column("physical_partition_id", sa.Uuid(), nullable=True),
        sa.Column("fabric_partition_id", sa.BigInteger(), nullable=True),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("device_id >= 1", name=op.f("ck_gpu_device_id")),
        sa.CheckConstraint(
            "fabric_partition_id IS NULL OR fabric_partition_id BETWEEN 0 AND 4294967295",
            name=op.f("ck_gpu_fabric_partition_id_u32"),
        ),
        sa.CheckConstraint(
            "gpu_uid >= 0 AND gpu_uid <= 18446744073709551615", name=op.f("ck_gpu_gpu_uid_u64")
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machine.id"], name=op.f("fk_gpu_machine_id_machine"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["physical_partition_id"],
            ["physical_partition.id"],
            name=op.f("fk_gpu_physical_partition_id_physical_partition"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("machine_id", "device_id", name=op.f("pk_gpu")),
        sa.UniqueConstraint("gpu_uid", name=op.f("uq_gpu_gpu_uid")),
    )
    op.create_index(op.f("ix_gpu_physical_partition_id"), "gpu", ["physical_partition_id"], unique=False)
    op.create_table(
        "machine_capability",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("instance_type_id", sa.Uuid(), nullable=True),
        sa.Column("machine_id", sa.String(length=256), nullable=True),
        sa.Column("position", sa.Integer(), server_default="0", nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("frequency", sa.String(length=64), nullable=True),
        sa.Column("capacity", sa.String(length=64), nullable=True),
        sa.Column("vendor", sa.String(length=256), nullable=True),
        sa.Column("cores", sa.Integer(), nullable=True),
        sa.Column("threads", sa.Integer(), nullable=True),
        sa.Column("inactive_devices", postgresql.ARRAY(sa.Integer()), nullable=True),
        sa.Column("hardware_revision", sa.String(length=64), nullable=True),
        sa.Column("count", sa.Integer(), nullable=True),
        sa.Column("device_type", sa.String(length=32), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "type IN ('CPU', 'Memory', 'GPU', 'Storage', 'Network', 'InfiniBand', 'DPU')",
            name=op.f("ck_machine_capability_type"),
        ),
        sa.CheckConstraint("count IS NULL OR count >= 0", name=op.f("ck_machine_capability_count")),
        sa.CheckConstraint(
            "num_nonnulls(instance_type_id, machine_id) = 1", name=op.f("ck_machine_capability_one_owner")
        ),
        sa.ForeignKeyConstraint(
            ["instance_type_id"],
            ["instance_type.id"],
            name=op.f("fk_machine_capability_instance_type_id_instance_type"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"],
            ["machine.id"],
            name=op.f("fk_machine_capability_machine_id_machine"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_machine_capability")),
    )
    op.create_index(
        op.f("ix_machine_capability_instance_type_id"),
        "machine_capability",
        ["instance_type_id"],
        unique=False,
    )
    op.create_index(
        op.f("ix_machine_capability_machine_id"), "machine_capability", ["machine_id"], unique=False
    )
    op.create_table(
        "status_detail",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=True),
        sa.Column("instance_type_id", sa.Uuid(), nullable=True),
        sa.Column("allocation_id", sa.Uuid(), nullable=True),
        sa.Column("vpc_id", sa.Uuid(), nullable=True),
        sa.Column("subnet_id", sa.Uuid(), nullable=True),
        sa.Column("logical_partition_id", sa.Uuid(), nullable=True),
        sa.Column("instance_id", sa.Uuid(), nullable=True),
        sa.Column("machine_id", sa.String(length=256), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column(
            "created", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False
        ),
        sa.Column(
            "updated", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False
        ),
        sa.CheckConstraint(
            "num_nonnulls(site_id, instance_type_id, allocation_id, vpc_id, subnet_id, logical_partition_id, instance_id, machine_id) = 1",
            name=op.f("ck_status_detail_one_owner"),
        ),
        sa.ForeignKeyConstraint(
            ["allocation_id"],
            ["allocation.id"],
            name=op.f("fk_status_detail_allocation_id_allocation"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["instance.id"],
            name=op.f("fk_status_detail_instance_id_instance"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["instance_type_id"],
            ["instance_type.id"],
            name=op.f("fk_status_detail_instance_type_id_instance_type"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["logical_partition_id"],
            ["logical_partition.id"],
            name=op.f("fk_status_detail_logical_partition_id_logical_partition"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"],
            ["machine.id"],
            name=op.f("fk_status_detail_machine_id_machine"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["site.id"], name=op.f("fk_status_detail_site_id_site"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["subnet_id"], ["subnet.id"], name=op.f("fk_status_detail_subnet_id_subnet"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["vpc_id"], ["vpc.id"], name=op.f("fk_status_detail_vpc_id_vpc"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_status_detail")),
    )
    op.create_index(
        "ix_status_detail_allocation_id",
        "status_detail",
        ["allocation_id", "created"],
        unique=False,
        postgresql_where=sa.text("allocation_id IS NOT NULL"),
    )
    op.create_index(
        "ix_status_detail_instance_id",
        "status_detail",
        ["instance_id", "created"],
        unique=False,
        postgresql_where=sa.text("instance_id IS NOT NULL"),
    )
    op.create_index(
        "ix_status_detail_instance_type_id",
        "status_detail",
        ["instance_type_id", "created"],
        unique=False,
        postgresql_where=sa.text("instance_type_id IS NOT NULL"),
    )
    op.create_index(
        "ix_status_detail_logical_partition_id",
        "status_detail",
        ["logical_partition_id", "created"],
        unique=False,
        postgresql_where=sa.text("logical_partition_id IS NOT NULL"),
    )
    op.create_index(
        "ix_status_detail_machine_id",
        "status_detail",
        ["machine_id", "created"],
        unique=False,
        postgresql_where=sa.text("machine_id IS NOT NULL"),
    )
    op.create_index(
        "ix_status_detail_site_id",
        "status_detail",
        ["site_id", "created"],
        unique=False,
        postgresql_where=sa.text("site_id IS NOT NULL"),
    )
    op.create_index(
        "ix_status_detail_subnet_id",
        "status_detail",
        ["subnet_id", "created"],
        unique=False,
        postgresql_where=sa.text("subnet_id IS NOT NULL"),
    )
    op.create_index(
        "ix_status_detail_vpc_id",
        "status_detail",
        ["vpc_id", "created"],
        unique=False,
        postgresql_where=sa.text("vpc_id IS NOT NULL"),
    )


def downgrade() -> None:

    op.drop_index(
        "ix_status_detail_vpc_id", table_name="status_detail", postgresql_where=sa.text("vpc_id IS NOT NULL")
    )
    op.drop_index(
        "ix_status_detail_subnet_id",
        table_name="status_detail",
        postgresql_where=sa.text("subnet_id IS NOT NULL"),
    )
    op.drop_index(
        "ix_status_detail_site_id",
        table_name="status_detail",
        postgresql_where=sa.text("site_id IS NOT NULL"),
    )
    op.drop_index(
        "ix_status_detail_machine_id",
        table_name="status_detail",
        postgresql_where=sa.text("machine_id IS NOT NULL"),
    )
    op.drop_index(
        "ix_status_detail_logical_partition_id",
        table_name="status_detail",
        postgresql_where=sa.text("logical_partition_id IS NOT NULL"),
    )
    op.drop_index(
        "ix_status_detail_instance_type_id",
        table_name="status_detail",
        postgresql_where=sa.text("instance_type_id IS NOT NULL"),
    )
    op.drop_index(
        "ix_status_detail_instance_id",
        table_name="status_detail",
        postgresql_where=sa.text("instance_id IS NOT NULL"),
    )
    op.drop_index(
        "ix_status_detail_allocation_id",
        table_name="status_detail",
        postgresql_where=sa.text("allocation_id IS NOT NULL"),
    )
    op.drop_table("status_detail")
    op.drop_index(op.f("ix_machine_capability_machine_id"), table_name="machine_capability")
    op.drop_index(op.f("ix_machine_capability_instance_type_id"), table_name="machine_capability")
    op.drop_table("machine_capability")
    op.drop_index(op.f("ix_gpu_physical_partition_id"), table_name="gpu")
    op.drop_table("gpu")
    op.drop_index(
        "uq_nvlink_interface_live_gpu",
        table_name="nvlink_interface",
        postgresql_where=sa.text("status <> 'Deleting'"),
    )
    op.drop_index(op.f("ix_nvlink_interface_logical_partition_id"), table_name="nvlink_interface")
    op.drop_index(op.f("ix_nvlink_interface_instance_id"), table_name="nvlink_interface")
    op.drop_table("nvlink_interface")
    op.drop_index("ix_machine_placement", table_name="machine")
    op.drop_index(op.f("ix_machine_nvlink_domain_uuid"), table_name="machine")
    op.drop_index(op.f("ix_machine_instance_type_id"), table_name="machine")
    op.drop_table("machine")
    op.drop_index(op.f("ix_instance_interface_subnet_id"), table_name="instance_interface")
    op.drop_index(op.f("ix_instance_interface_instance_id"), table_name="instance_interface")
    op.drop_table("instance_interface")
    op.drop_index(op.f("ix_subnet_vpc_id"), table_name="subnet")
    op.drop_table("subnet")
    op.drop_index(op.f("ix_instance_vpc_id"), table_name="instance")
    op.drop_index(op.f("ix_instance_site_id"), table_name="instance")
    op.drop_index(op.f("ix_instance_instance_type_id"), table_name="instance")
    op.drop_table("instance")
    op.drop_index(op.f("ix_vpc_site_id"), table_name="vpc")
    op.drop_index(op.f("ix_vpc_nvlink_logical_partition_id"), table_name="vpc")
    op.drop_table("vpc")
    op.drop_table("physical_partition")
    op.drop_index("ix_fabric_intent_open", table_name="fabric_intent")
    op.drop_index(op.f("ix_fabric_intent_logical_partition_id"), table_name="fabric_intent")
    op.drop_table("fabric_intent")
    op.drop_index(op.f("ix_allocation_constraint_instance_type_id"), table_name="allocation_constraint")
    op.drop_table("allocation_constraint")
    op.drop_index(op.f("ix_tenant_site_site_id"), table_name="tenant_site")
    op.drop_table("tenant_site")
    op.drop_index(op.f("ix_nvlink_domain_site_id"), table_name="nvlink_domain")
    op.drop_table("nvlink_domain")
    op.drop_index(op.f("ix_logical_partition_site_id"), table_name="logical_partition")
    op.drop_table("logical_partition")
    op.drop_index(op.f("ix_instance_type_infrastructure_provider_id"), table_name="instance_type")
    op.drop_table("instance_type")
    op.drop_index(op.f("ix_allocation_site_id"), table_name="allocation")
    op.drop_index(op.f("ix_allocation_infrastructure_provider_id"), table_name="allocation")
    op.drop_table("allocation")
    op.drop_table("site")
    op.drop_table("tenant")
    op.drop_table("nvlink_nmxc_endpoint")
    op.drop_table("infrastructure_provider")
    op.drop_table("fabric_credential")
