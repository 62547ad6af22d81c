// kubectl describe for ConfigMaps, Secrets (sizes only, never a value) and PersistentVolumeClaims.
// ConfigMap and Secret keys are listed sorted, as kubectl lists them.
import { describeEvents } from './events.js';
import {
  arr,
  byteOrder,
  goList,
  obj,
  printAnnotationsMultiline,
  printLabelsMultiline,
  printPodsMultiline,
  rfc1123z,
  since,
  str,
  type Json,
} from './format.js';
import { Quantity } from '../cluster-access/quantity.js';
import { tabbed, type DescribeWriter } from './text.js';

export function describeConfigMap(cm: Json, events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(cm.metadata);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    w.write(0, '\nData\n====\n');
    const data = obj(cm.data);
    for (const key of Object.keys(data).sort(byteOrder)) {
      w.write(0, `${key}:\n----\n`);
      w.write(0, `${str(data[key])}\n`);
      w.write(0, '\n');
    }
    w.write(0, '\nBinaryData\n====\n');
    const binaryData = obj(cm.binaryData);
    for (const key of Object.keys(binaryData).sort(byteOrder))
      w.write(0, `${key}: ${base64Length(binaryData[key])} bytes\n`);
    w.write(0, '\n');
    describeEvents(w, events);
  });
}

/** Decoded length of a base64 value (what len(secret.Data[k]) is in kubectl). */
function base64Length(value: unknown): number {
  return typeof value === 'string' ? Buffer.from(value, 'base64').length : 0;
}

/**
 * kubectl prints every key's size, except a service-account token, which it prints in clear; kiteline
 * prints its size too: a describe answer never carries a Secret's value.
 */
export function describeSecret(secret: Json): string {
  return tabbed((w) => {
    const meta = obj(secret.metadata);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    w.write(0, `\nType:\t${str(secret.type)}\n`);
    w.write(0, '\nData\n====\n');
    const data = obj(secret.data);
    for (const key of Object.keys(data).sort(byteOrder)) w.write(0, `${key}:\t${base64Length(data[key])} bytes\n`);
  });
}

/** storageutil.GetPersistentVolumeClaimClass. */
function claimClass(pvc: Json): string {
  const annotations = obj(pvc.metadata?.annotations);
  if ('volume.beta.kubernetes.io/storage-class' in annotations)
    return str(annotations['volume.beta.kubernetes.io/storage-class']);
  return str(pvc.spec?.storageClassName);
}

/** storageutil.GetAccessModesAsString. */
function accessModesString(modes: unknown): string {
  const list = arr(modes) as unknown as string[];
  const short: Array<[string, string]> = [
    ['ReadWriteOnce', 'RWO'],
    ['ReadOnlyMany', 'ROX'],
    ['ReadWriteMany', 'RWX'],
    ['ReadWriteOncePod', 'RWOP'],
  ];
  return short
    .filter(([mode]) => list.includes(mode))
    .map(([, s]) => s)
    .join(',');
}

/** kubectl's printPersistentVolumeClaim (a full claim, or the template of an ephemeral volume). */
export function printPersistentVolumeClaim(w: DescribeWriter, pvc: Json, isFullPVC: boolean): void {
  const meta = obj(pvc.metadata);
  const spec = obj(pvc.spec);
  const status = obj(pvc.status);
  if (isFullPVC) {
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
  }
  w.write(0, `StorageClass:\t${claimClass(pvc)}\n`);
  if (isFullPVC) {
    if (meta.deletionTimestamp) w.write(0, `Status:\tTerminating (lasts ${since(meta.deletionTimestamp)})\n`);
    else w.write(0, `Status:\t${str(status.phase)}\n`);
  }
  w.write(0, `Volume:\t${str(spec.volumeName)}\n`);
  printLabelsMultiline(w, 'Labels', meta.labels);
  printAnnotationsMultiline(w, 'Annotations', meta.annotations);
  if (isFullPVC) w.write(0, `Finalizers:\t${goList(meta.finalizers)}\n`);
  let capacity = '';
  let accessModes = '';
  if (str(spec.volumeName)) {
    accessModes = accessModesString(status.accessModes);
    capacity = Quantity.parse(obj(status.capacity).storage).toString();
  }
  w.write(0, `Capacity:\t${capacity}\n`);
  w.write(0, `Access Modes:\t${accessModes}\n`);
  if (spec.volumeMode !== undefined && spec.volumeMode !== null) w.write(0, `VolumeMode:\t${str(spec.volumeMode)}\n`);
  if (spec.dataSource) {
    const ds = obj(spec.dataSource);
    w.write(0, 'DataSource:\n');
    if (ds.apiGroup !== undefined && ds.apiGroup !== null) w.write(1, `APIGroup:\t${str(ds.apiGroup)}\n`);
    w.write(1, `Kind:\t${str(ds.kind)}\n`);
    w.write(1, `Name:\t${str(ds.name)}\n`);
  }
}

/**
 * The pods using the claim (kubectl's getPodsForPVC): those of the namespace that mount it, then the
 * pod that owns it (an ephemeral volume's claim) if that one does not mount it by name.
 */
export function podsUsingClaim(pods: Json[], claim: Json): Json[] {
  const claimName = str(claim.metadata?.name);
  const using: Json[] = [];
  for (const pod of pods) {
    for (const volume of arr(pod.spec?.volumes)) {
      if (volume.persistentVolumeClaim && volume.persistentVolumeClaim.claimName === claimName) using.push(pod);
    }
  }
  for (const owner of arr(claim.metadata?.ownerReferences)) {
    if (owner.kind !== 'Pod') continue;
    const pod = pods.find((p) => p.metadata?.uid === owner.uid);
    if (pod && !using.some((p) => p.metadata?.uid === owner.uid)) using.push(pod);
  }
  return using;
}

export function describePersistentVolumeClaim(pvc: Json, events: Json[], pods: Json[]): string {
  return tabbed((w) => {
    printPersistentVolumeClaim(w, pvc, true);
    printPodsMultiline(w, 'Used By', pods);
    const conditions = arr(pvc.status?.conditions);
    if (conditions.length > 0) {
      w.write(0, 'Conditions:\n');
      w.write(1, 'Type\tStatus\tLastProbeTime\tLastTransitionTime\tReason\tMessage\n');
      w.write(1, '----\t------\t-----------------\t------------------\t------\t-------\n');
      for (const c of conditions) {
        const times = `${rfc1123z(c.lastProbeTime)} \t${rfc1123z(c.lastTransitionTime)}`;
        w.write(1, `${str(c.type)} \t${str(c.status)} \t${times} \t${str(c.reason)} \t${str(c.message)}\n`);
      }
    }
    describeEvents(w, events);
  });
}
