import { Select } from '@mantine/core';
import { useSearchParams } from 'react-router';

/**
 * A list's status filter kept in the URL's `param` (so a reload, a link or Back keeps it): the
 * status chosen, if it is one of `choices`, and the setter the select calls.
 */
export function useUrlChoice<T extends string>(param: string, choices: readonly T[]): [T | null, (value: string | null) => void] {
  const [params, setParams] = useSearchParams();
  const value = choices.find((c) => c === params.get(param)) ?? null;
  const choose = (next: string | null) => {
    const updated = new URLSearchParams(params);
    if (next) updated.set(param, next);
    else updated.delete(param);
    setParams(updated, { replace: true });
  };
  return [value, choose];
}

/** The small "Any status" select of a list's card header (`placeholder` names what it filters by otherwise). */
export function StatusSelect<T extends string>({
  label,
  value,
  choices,
  onChange,
  placeholder = 'Any status',
}: {
  label: string;
  value: T | null;
  choices: readonly T[];
  onChange: (value: string | null) => void;
  placeholder?: string;
}) {
  return <Select aria-label={label} size="xs" w={180} placeholder={placeholder} clearable value={value} data={choices} onChange={onChange} />;
}
