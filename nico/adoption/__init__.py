"""Taking over what exists on a live site: a foreign NVLink partition adopted as a tenant's logical
partition (``nico admin logical-partition adopt``), and a NICo site's logical partitions, VPCs and
instances imported with their ids (``nico admin import``), each without a single fabric change."""
