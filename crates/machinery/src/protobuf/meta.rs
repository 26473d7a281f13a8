//! `meta.k8s.io/v1` types: `ObjectMeta` (with owner references and managed fields) and
//! `DeleteOptions`.

use k8s_pb::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, FieldsV1, ManagedFieldsEntry, ObjectMeta, OwnerReference, Preconditions,
};

use super::json::{In, JsonMap, Out};

/// Converts `ObjectMeta` to its JSON form.
pub(super) fn object_meta_to_json(m: ObjectMeta, path: &str) -> Result<JsonMap, String> {
    let mut o = Out::new(path);
    o.string("name", m.name);
    o.string("generateName", m.generate_name);
    o.string("namespace", m.namespace);
    o.string("selfLink", m.self_link);
    o.string("uid", m.uid);
    o.string("resourceVersion", m.resource_version);
    o.int("generation", m.generation);
    o.time("creationTimestamp", m.creation_timestamp)?;
    o.time("deletionTimestamp", m.deletion_timestamp)?;
    o.opt_int(
        "deletionGracePeriodSeconds",
        m.deletion_grace_period_seconds,
    );
    o.string_map("labels", m.labels);
    o.string_map("annotations", m.annotations);
    o.objects(
        "ownerReferences",
        m.owner_references
            .into_iter()
            .map(owner_reference_to_json)
            .collect(),
    );
    o.strings("finalizers", m.finalizers);
    let managed = m
        .managed_fields
        .into_iter()
        .enumerate()
        .map(|(i, e)| managed_fields_to_json(e, &o.path_of_item("managedFields", i)))
        .collect::<Result<Vec<_>, _>>()?;
    o.objects("managedFields", managed);
    Ok(o.finish())
}

/// Reads `ObjectMeta` from its JSON form.
pub(super) fn object_meta_from_json(r: &In<'_>) -> Result<ObjectMeta, String> {
    Ok(ObjectMeta {
        name: r.string("name")?,
        generate_name: r.string("generateName")?,
        namespace: r.string("namespace")?,
        self_link: r.string("selfLink")?,
        uid: r.string("uid")?,
        resource_version: r.string("resourceVersion")?,
        generation: r.int64("generation")?,
        creation_timestamp: r.time("creationTimestamp")?,
        deletion_timestamp: r.time("deletionTimestamp")?,
        deletion_grace_period_seconds: r.int64("deletionGracePeriodSeconds")?,
        labels: r.string_map("labels")?,
        annotations: r.string_map("annotations")?,
        owner_references: r
            .objects("ownerReferences")?
            .iter()
            .map(owner_reference_from_json)
            .collect::<Result<_, _>>()?,
        finalizers: r.strings("finalizers")?,
        managed_fields: r
            .objects("managedFields")?
            .iter()
            .map(managed_fields_from_json)
            .collect::<Result<_, _>>()?,
    })
}

fn owner_reference_to_json(m: OwnerReference) -> JsonMap {
    let mut o = Out::new("");
    o.string("apiVersion", m.api_version);
    o.string("kind", m.kind);
    o.string("name", m.name);
    o.string("uid", m.uid);
    o.opt_bool("controller", m.controller);
    o.opt_bool("blockOwnerDeletion", m.block_owner_deletion);
    o.finish()
}

fn owner_reference_from_json(r: &In<'_>) -> Result<OwnerReference, String> {
    Ok(OwnerReference {
        api_version: r.string("apiVersion")?,
        kind: r.string("kind")?,
        name: r.string("name")?,
        uid: r.string("uid")?,
        controller: r.boolean("controller")?,
        block_owner_deletion: r.boolean("blockOwnerDeletion")?,
    })
}

fn managed_fields_to_json(m: ManagedFieldsEntry, path: &str) -> Result<JsonMap, String> {
    let mut o = Out::new(path);
    o.string("manager", m.manager);
    o.string("operation", m.operation);
    o.string("apiVersion", m.api_version);
    o.time("time", m.time)?;
    o.string("fieldsType", m.fields_type);
    // FieldsV1 carries its JSON document verbatim in `raw`; Go prints an empty one as `null`,
    // which is the same as leaving the field out.
    if let Some(raw) = m
        .fields_v1
        .and_then(|f| f.raw)
        .filter(|raw| !raw.is_empty())
    {
        let value = serde_json::from_slice(&raw)
            .map_err(|e| format!("{}: invalid JSON in FieldsV1: {e}", o.path_of("fieldsV1")))?;
        o.value("fieldsV1", value);
    }
    o.string("subresource", m.subresource);
    Ok(o.finish())
}

fn managed_fields_from_json(r: &In<'_>) -> Result<ManagedFieldsEntry, String> {
    let fields_v1 = match r.get("fieldsV1") {
        None => None,
        Some(value) => Some(FieldsV1 {
            raw: Some(
                serde_json::to_vec(value).map_err(|e| format!("{}: {e}", r.path_of("fieldsV1")))?,
            ),
        }),
    };
    Ok(ManagedFieldsEntry {
        manager: r.string("manager")?,
        operation: r.string("operation")?,
        api_version: r.string("apiVersion")?,
        time: r.time("time")?,
        fields_type: r.string("fieldsType")?,
        fields_v1,
        subresource: r.string("subresource")?,
    })
}

/// Converts `DeleteOptions` to its JSON form (without `apiVersion`/`kind`).
pub(super) fn delete_options_to_json(m: DeleteOptions) -> Result<JsonMap, String> {
    let mut o = Out::new("");
    o.opt_int("gracePeriodSeconds", m.grace_period_seconds);
    o.object(
        "preconditions",
        m.preconditions.map(|p| {
            let mut o = Out::new("preconditions");
            o.opt_string("uid", p.uid);
            o.opt_string("resourceVersion", p.resource_version);
            o.finish()
        }),
    );
    o.opt_bool("orphanDependents", m.orphan_dependents);
    o.opt_string("propagationPolicy", m.propagation_policy);
    o.strings("dryRun", m.dry_run);
    o.opt_bool(
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        m.ignore_store_read_error_with_cluster_breaking_potential,
    );
    Ok(o.finish())
}

/// Reads `DeleteOptions` from its JSON form.
pub(super) fn delete_options_from_json(r: &In<'_>) -> Result<DeleteOptions, String> {
    Ok(DeleteOptions {
        grace_period_seconds: r.int64("gracePeriodSeconds")?,
        preconditions: r
            .object("preconditions")?
            .map(|p| -> Result<_, String> {
                Ok(Preconditions {
                    uid: p.string("uid")?,
                    resource_version: p.string("resourceVersion")?,
                })
            })
            .transpose()?,
        orphan_dependents: r.boolean("orphanDependents")?,
        propagation_policy: r.string("propagationPolicy")?,
        dry_run: r.strings("dryRun")?,
        ignore_store_read_error_with_cluster_breaking_potential: r
            .boolean("ignoreStoreReadErrorWithClusterBreakingPotential")?,
    })
}
