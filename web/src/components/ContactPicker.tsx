import { Select } from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { herald } from '../api.ts';
import { useProjectId } from '../hooks.ts';

/** A searchable contact select that loads at most 10 matches at a time. */
export function ContactPicker({ value, onChange, label }: { value: string | null; onChange: (id: string | null) => void; label: string }) {
  const projectId = useProjectId();
  const [search, setSearch] = useState('');
  const [debounced] = useDebouncedValue(search, 250);
  const [selected, setSelected] = useState<{ value: string; label: string } | null>(null);
  const contacts = useQuery({
    queryKey: [projectId, 'contacts', { search: debounced, picker: true }],
    queryFn: () => herald.contacts.list({ limit: 10, search: debounced || undefined }),
  });
  const options = (contacts.data?.data ?? []).map((c) => ({ value: c.id, label: c.email }));
  if (selected && !options.some((o) => o.value === selected.value)) options.unshift(selected);
  return (
    <Select
      label={label}
      placeholder="Sample contact (no data)"
      searchable
      clearable
      data={options}
      value={value}
      searchValue={search}
      onSearchChange={setSearch}
      nothingFoundMessage={contacts.isPending ? 'Loading…' : 'No contact matches'}
      onChange={(id, option) => {
        setSelected(option ?? null);
        onChange(id);
      }}
    />
  );
}
