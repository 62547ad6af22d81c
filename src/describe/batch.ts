// kubectl describe for Jobs (parallelism, completions, policies, times, pod counts, template) and
// CronJobs (schedule, policies, the job template, the last schedule and the active jobs).
import { describeEvents } from './events.js';
import {
  arr,
  controllerOf,
  goValue,
  humanDuration,
  obj,
  printAnnotationsMultiline,
  printBoolPtr,
  printLabelsMultiline,
  rfc1123z,
  selectorString,
  str,
  type Json,
} from './format.js';
import { describePodTemplate } from './pods.js';
import { tabbed, type DescribeWriter } from './text.js';

const isSet = (value: unknown) => value !== undefined && value !== null;

/** kubectl's capIndexesListOrNone: the completed indexes, cut after the first comma past `softLimit` bytes. */
function capIndexes(indexes: string, softLimit: number): string {
  if (!indexes) return '<none>';
  const comma = indexes.indexOf(',', softLimit);
  return comma === -1 ? indexes : `${indexes.slice(0, comma + 1)}...`;
}

export function describeJob(job: Json, events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(job.metadata);
    const spec = obj(job.spec);
    const status = obj(job.status);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    w.write(0, `Selector:\t${selectorString(spec.selector)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    const controlledBy = controllerOf(job);
    if (controlledBy) w.write(0, `Controlled By:\t${controlledBy}\n`);
    if (isSet(spec.parallelism)) w.write(0, `Parallelism:\t${goValue(spec.parallelism)}\n`);
    w.write(0, `Completions:\t${isSet(spec.completions) ? goValue(spec.completions) : '<unset>'}\n`);
    if (isSet(spec.completionMode)) w.write(0, `Completion Mode:\t${str(spec.completionMode)}\n`);
    if (isSet(spec.suspend)) w.write(0, `Suspend:\t${goValue(spec.suspend)}\n`);
    if (isSet(spec.backoffLimit)) w.write(0, `Backoff Limit:\t${goValue(spec.backoffLimit)}\n`);
    if (isSet(spec.ttlSecondsAfterFinished))
      w.write(0, `TTL Seconds After Finished:\t${goValue(spec.ttlSecondsAfterFinished)}\n`);
    if (status.startTime) w.write(0, `Start Time:\t${rfc1123z(status.startTime)}\n`);
    if (status.completionTime) w.write(0, `Completed At:\t${rfc1123z(status.completionTime)}\n`);
    if (status.startTime && status.completionTime) {
      w.write(0, `Duration:\t${humanDuration(Date.parse(status.completionTime) - Date.parse(status.startTime))}\n`);
    }
    if (isSet(spec.activeDeadlineSeconds))
      w.write(0, `Active Deadline Seconds:\t${goValue(spec.activeDeadlineSeconds)}s\n`);
    const [active, succeeded, failed] = [status.active, status.succeeded, status.failed].map((n) => goValue(n ?? 0));
    const ready = isSet(status.ready) ? ` (${goValue(status.ready)} Ready)` : '';
    w.write(0, `Pods Statuses:\t${active} Active${ready} / ${succeeded} Succeeded / ${failed} Failed\n`);
    if (spec.completionMode === 'Indexed')
      w.write(0, `Completed Indexes:\t${capIndexes(str(status.completedIndexes), 50)}\n`);
    describePodTemplate(w, obj(spec.template));
    describeEvents(w, events);
  });
}

function describeJobTemplate(w: DescribeWriter, template: Json): void {
  const spec = obj(template.spec);
  w.write(0, `Selector:\t${isSet(spec.selector) ? selectorString(spec.selector) : '<unset>'}\n`);
  w.write(0, `Parallelism:\t${isSet(spec.parallelism) ? goValue(spec.parallelism) : '<unset>'}\n`);
  w.write(0, `Completions:\t${isSet(spec.completions) ? goValue(spec.completions) : '<unset>'}\n`);
  if (isSet(spec.activeDeadlineSeconds))
    w.write(0, `Active Deadline Seconds:\t${goValue(spec.activeDeadlineSeconds)}s\n`);
  describePodTemplate(w, obj(spec.template));
}

export function describeCronJob(cronJob: Json, events: Json[]): string {
  return tabbed((w) => {
    const meta = obj(cronJob.metadata);
    const spec = obj(cronJob.spec);
    const status = obj(cronJob.status);
    w.write(0, `Name:\t${str(meta.name)}\n`);
    w.write(0, `Namespace:\t${str(meta.namespace)}\n`);
    printLabelsMultiline(w, 'Labels', meta.labels);
    printAnnotationsMultiline(w, 'Annotations', meta.annotations);
    w.write(0, `Schedule:\t${str(spec.schedule)}\n`);
    w.write(0, `Concurrency Policy:\t${str(spec.concurrencyPolicy)}\n`);
    w.write(0, `Suspend:\t${printBoolPtr(spec.suspend)}\n`);
    const orUnset = (value: unknown, unit = '') => (isSet(value) ? `${goValue(value)}${unit}` : '<unset>');
    w.write(0, `Successful Job History Limit:\t${orUnset(spec.successfulJobsHistoryLimit)}\n`);
    w.write(0, `Failed Job History Limit:\t${orUnset(spec.failedJobsHistoryLimit)}\n`);
    w.write(0, `Starting Deadline Seconds:\t${orUnset(spec.startingDeadlineSeconds, 's')}\n`);
    describeJobTemplate(w, obj(spec.jobTemplate));
    w.write(0, `Last Schedule Time:\t${status.lastScheduleTime ? rfc1123z(status.lastScheduleTime) : '<unset>'}\n`);
    w.write(0, 'Active Jobs:\t');
    const active = arr(status.active);
    if (active.length === 0) w.line('<none>');
    else {
      w.write(0, active.map((j) => str(j.name)).join(', '));
      w.line('');
    }
    describeEvents(w, events);
  });
}
